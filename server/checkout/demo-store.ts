import type { Database } from 'nuxt-idempotency/db'
import { tenants } from '../db/schema'
import type { Tenant } from '../tenants/service'

/** The tenant the checkout page's demo store sells as; it has no secret key, only sessions. */
export const DEMO_TENANT: Tenant = { id: 'ten_demo_store', name: 'Demo store' }

export const DEMO_CURRENCY = 'IDR'

/** The demo store's catalogue; prices in minor units of DEMO_CURRENCY (IDR has none below the rupiah). */
export const demoCatalogue = [
  { sku: 'TEE-ORGANIC', name: 'Organic cotton tee', description: 'Heavyweight, garment-dyed, made to last.', unitPrice: 149_000 },
  { sku: 'MUG-ENAMEL', name: 'Enamel camp mug', description: 'Chip-resistant, 350 ml, stacks neatly.', unitPrice: 89_000 },
  { sku: 'TOTE-CANVAS', name: 'Canvas tote', description: 'Waxed canvas with an inside pocket.', unitPrice: 119_000 },
  { sku: 'CAP-WOOL', name: 'Wool cap', description: 'Merino blend, one size fits most.', unitPrice: 99_000 },
] as const

export async function ensureDemoTenant(db: Database): Promise<void> {
  await db.insert(tenants).values(DEMO_TENANT).onConflictDoNothing({ target: tenants.id })
}
