import { describe, expect, it } from 'vitest'
import { currencies, currencyProblem, fromProviderAmount, fromStripeAmount, toProviderAmount, toStripeAmount } from '../../server/payments/currencies'

/**
 * The app counts each currency in its ISO 4217 minor unit (IDR in whole rupiah); each provider in its
 * own. One case per rule Stripe documents (docs.stripe.com/currencies), both ways.
 */

describe('the table', () => {
  it('holds ISO 4217 exponents, and the app\'s units (IDR in whole rupiah)', () => {
    const exponents = Object.fromEntries(['USD', 'JPY', 'KRW', 'ISK', 'UGX', 'HUF', 'TWD', 'MGA', 'KWD', 'BHD', 'CLF', 'IDR'].map(code => [code, currencies.get(code)?.isoExponent]))
    expect(exponents).toEqual({ USD: 2, JPY: 0, KRW: 0, ISK: 0, UGX: 0, HUF: 2, TWD: 2, MGA: 2, KWD: 3, BHD: 3, CLF: 4, IDR: 2 })
    expect(currencies.get('IDR')?.appDecimals).toBe(0)
    for (const [code, currency] of currencies) {
      expect(code).toMatch(/^[A-Z]{3}$/)
      if (code !== 'IDR') expect(currency.appDecimals, code).toBe(currency.isoExponent)
    }
  })

  it('lets Midtrans take IDR only, and Stripe none of the codes without a minor unit', () => {
    expect([...currencies.values()].filter(currency => currency.midtrans).map(currency => currency.code)).toEqual(['IDR'])
    expect(currencies.get('XAU')).toBeUndefined()
    expect(currencies.get('UYI')?.stripe).toBeUndefined()
  })
})

describe('Stripe amounts, both ways', () => {
  const roundTrip = (amount: number, currency: string) => fromStripeAmount(toStripeAmount(amount, currency), currency)

  it('USD and the other two-decimal currencies: cents as they are', () => {
    expect(toStripeAmount(4200, 'USD')).toBe(4200)
    expect(fromStripeAmount(4200, 'usd')).toBe(4200)
    expect(currencyProblem('stripe', 4201, 'USD')).toBeUndefined()
  })

  it('JPY and KRW, zero-decimal everywhere: yen and won as they are', () => {
    expect(toStripeAmount(500, 'JPY')).toBe(500)
    expect(fromStripeAmount(500, 'jpy')).toBe(500)
    expect(toStripeAmount(10_000, 'KRW')).toBe(10_000)
    expect(fromStripeAmount(10_000, 'krw')).toBe(10_000)
    expect(currencyProblem('stripe', 501, 'JPY')).toBeUndefined()
  })

  it('ISK: whole krónur here, hundredths at Stripe, which charges whole krónur only', () => {
    expect(toStripeAmount(5000, 'ISK')).toBe(500_000)
    expect(fromStripeAmount(500_000, 'isk')).toBe(5000)
    // Fractions Stripe no longer charges, read down to the króna below.
    expect(fromStripeAmount(500_050, 'isk')).toBe(5000)
    // Any whole amount here is a multiple of 100 there: an ISK order never needs rounding.
    expect(currencyProblem('stripe', 5001, 'ISK')).toBeUndefined()
    expect(toStripeAmount(5001, 'ISK') % 100).toBe(0)
  })

  it('UGX: whole shillings here, hundredths at Stripe (its special case), multiples of 100 only', () => {
    expect(toStripeAmount(60_000, 'UGX')).toBe(6_000_000)
    expect(fromStripeAmount(6_000_000, 'ugx')).toBe(60_000)
    expect(currencyProblem('stripe', 60_001, 'UGX')).toBeUndefined()
  })

  it('HUF and TWD: two-decimal for charges and refunds (whole units are for payouts only)', () => {
    expect(toStripeAmount(1045, 'HUF')).toBe(1045)
    expect(fromStripeAmount(1045, 'huf')).toBe(1045)
    expect(toStripeAmount(80_045, 'TWD')).toBe(80_045)
    expect(fromStripeAmount(80_045, 'twd')).toBe(80_045)
    expect(currencyProblem('stripe', 1045, 'HUF')).toBeUndefined()
    expect(currencyProblem('stripe', 80_045, 'TWD')).toBeUndefined()
  })

  it.each(['KWD', 'BHD', 'JOD', 'OMR', 'TND'])('%s: thousandths both sides, but Stripe takes only a last digit of 0', (code) => {
    expect(toStripeAmount(5120, code)).toBe(5120)
    expect(fromStripeAmount(5120, code.toLowerCase())).toBe(5120)
    expect(currencyProblem('stripe', 5120, code)).toBeUndefined()
    expect(currencyProblem('stripe', 5124, code)).toBe(`Stripe charges ${code} to 2 decimal places, so 5124 (5.124 ${code}) would be rounded. Order an amount that is a multiple of 10, such as 5120 or 5130.`)
  })

  it('MGA: hundredths here (ISO), whole ariary at Stripe (zero-decimal): only whole ariary convert', () => {
    expect(toStripeAmount(15_000, 'MGA')).toBe(150)
    expect(fromStripeAmount(150, 'mga')).toBe(15_000)
    expect(currencyProblem('stripe', 15_050, 'MGA')).toBe('Stripe charges MGA to whole units, so 15050 (150.50 MGA) would be rounded. Order an amount that is a multiple of 100, such as 15000 or 15100.')
    expect(() => toStripeAmount(15_050, 'MGA')).toThrow(RangeError)
  })

  it('IDR: whole rupiah here, hundredths at Stripe; read back rounded down', () => {
    expect(toStripeAmount(150_000, 'IDR')).toBe(15_000_000)
    expect(fromStripeAmount(15_000_000, 'idr')).toBe(150_000)
    expect(fromStripeAmount(14_999_950, 'idr')).toBe(149_999)
    expect(fromStripeAmount(13, 'idr')).toBe(0)
    expect(currencyProblem('stripe', 150_001, 'IDR')).toBeUndefined()
  })

  it('round-trips every amount of every currency Stripe takes exactly', () => {
    for (const { code, stripe } of currencies.values()) {
      if (!stripe || currencyProblem('stripe', 12_300, code)) continue
      expect(roundTrip(12_300, code), code).toBe(12_300)
    }
  })

  it('passes a currency unknown to the table as it is (the order check refuses it first)', () => {
    expect(toStripeAmount(700, 'XAU')).toBe(700)
    expect(fromStripeAmount(700, 'xau')).toBe(700)
  })
})

describe('Midtrans and mockpay amounts', () => {
  it('Midtrans: IDR in whole rupiah (gross_amount), as the app counts it', () => {
    expect(toProviderAmount('midtrans', 150_000, 'IDR')).toBe(150_000)
    expect(fromProviderAmount('midtrans', 150_000, 'IDR')).toBe(150_000)
  })

  it('mockpay: every amount as given, in any currency', () => {
    for (const currency of ['IDR', 'USD', 'ISK', 'KWD', 'MGA', 'ABC']) {
      expect(toProviderAmount('mockpay', 5125, currency)).toBe(5125)
      expect(fromProviderAmount('mockpay', 5125, currency)).toBe(5125)
    }
  })
})

describe('currencyProblem', () => {
  it('an ISK order of 5000 goes to Stripe as 500000, with no problem', () => {
    expect(currencyProblem('stripe', 5000, 'ISK')).toBeUndefined()
    expect(toProviderAmount('stripe', 5000, 'ISK')).toBe(500_000)
  })

  it('a KWD amount not ending in 0 is a problem for Stripe, and fine for mockpay', () => {
    expect(currencyProblem('stripe', 1005, 'KWD')).toMatch(/^Stripe charges KWD to 2 decimal places, so 1005 \(1\.005 KWD\) would be rounded\. Order an amount that is a multiple of 10, such as 1000 or 1010\.$/)
    expect(currencyProblem('mockpay', 1005, 'KWD')).toBeUndefined()
  })

  it('USD is a problem for Midtrans, which takes IDR only; IDR is not', () => {
    expect(currencyProblem('midtrans', 4200, 'USD')).toBe('Midtrans, the configured payment provider, charges in IDR only, not USD. Order in IDR, in whole rupiah.')
    expect(currencyProblem('midtrans', 150_000, 'IDR')).toBeUndefined()
  })

  it('a currency Stripe does not charge in, or that is not ISO 4217, is a problem for Stripe only', () => {
    for (const code of ['XAU', 'ABC', 'IQD', 'KPW']) {
      expect(currencyProblem('stripe', 1000, code), code).toBe(`Stripe, the configured payment provider, does not charge in ${code}. Order in a currency listed at https://docs.stripe.com/currencies, in its ISO 4217 minor unit (IDR in whole rupiah).`)
      expect(currencyProblem('mockpay', 1000, code), code).toBeUndefined()
    }
  })

  it('reads the currency code in either case, as Stripe writes it in lower case', () => {
    expect(currencyProblem('stripe', 5124, 'kwd')).toMatch(/^Stripe charges KWD/)
    expect(toProviderAmount('stripe', 5000, 'isk')).toBe(500_000)
  })

  it('writes small amounts with their leading zeros, and suggests no zero amount', () => {
    expect(currencyProblem('stripe', 5, 'KWD')).toMatch(/so 5 \(0\.005 KWD\) would be rounded\. Order an amount that is a multiple of 10, such as 10\.$/)
  })
})
