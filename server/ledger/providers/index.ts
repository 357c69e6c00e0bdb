import { type AppConfig, useConfig } from '../../config'
import { useDatabaseHandle } from '../../db'
import type { Database } from '@idempotent-checkout/db-kit'
import type { ProviderLedgerReader } from '../types'
import { createMidtransLedgerReader } from './midtrans'
import { createMockpayLedgerReader } from './mockpay'
import { createStripeLedgerReader } from './stripe'

/** The ledger reader of the provider PAYMENT_PROVIDER names: the one whose payments the orders hold. */
export function createLedgerReader(config: AppConfig, db: Database): ProviderLedgerReader {
  switch (config.PAYMENT_PROVIDER) {
    case 'stripe': return createStripeLedgerReader(config)
    case 'midtrans': return createMidtransLedgerReader(config)
    case 'mockpay': return createMockpayLedgerReader(db)
  }
}

let reader: ProviderLedgerReader | undefined

export function useLedgerReader(): ProviderLedgerReader {
  reader ??= createLedgerReader(useConfig(), useDatabaseHandle().db)
  return reader
}
