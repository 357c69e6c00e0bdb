import type { PaymentProviderName } from '../config'

/**
 * Money in each currency's real units (docs/payments-and-refunds.md#currencies). The app counts an
 * amount as an integer in the currency's ISO 4217 minor unit (JPY in yen, USD in cents, KWD in
 * fils), except IDR, counted in whole rupiah as shoppers and Midtrans count it. Each provider
 * counts in its own units; this one table says how, and every conversion, both ways, and the
 * order-time check read it.
 */

const codes = (list: string) => new Set(list.split(' '))

/** ISO 4217 list one: the codes with a minor unit (funds, metals and test codes have none). */
const isoCodesByExponent: Record<number, string> = {
  0: 'BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF',
  2: 'AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD BTN BWP BYN BZD '
    + 'CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS '
    + 'GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL '
    + 'MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK '
    + 'PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS '
    + 'TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD XCG YER ZAR ZMW ZWG',
  3: 'BHD IQD JOD KWD LYD OMR TND',
  4: 'CLF UYW',
}

/**
 * How a provider counts a currency: `decimals`, the places its integer amounts are in; `charged`,
 * the places it actually charges to. An amount finer than `charged` is refused or rounded.
 */
interface ProviderUnits { decimals: number, charged: number }

/**
 * Stripe (docs.stripe.com/currencies). Amounts are in the currency's minor unit, two decimals unless
 * listed here. Zero-decimal: as they are. Three-decimal: in thousandths, but the last digit must be 0
 * (5.124 KWD is 5120 or 5130). ISK and UGX are effectively zero-decimal, yet Stripe keeps them
 * two-decimal for backwards compatibility: 5 ISK is 500, and only multiples of 100 are accepted (the
 * same page also lists UGX among the zero-decimal currencies; its special-cases entry, the specific
 * rule, says hundredths). HUF and TWD are zero-decimal for payouts only; charges and refunds may
 * have two decimals, so they need nothing here.
 */
const stripeZeroDecimal = codes('BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF VND VUV XAF XOF XPF')
const stripeThreeDecimal = codes('BHD JOD KWD OMR TND')
const stripeWholeHundredths = codes('ISK UGX')
/** The presentment currencies Stripe documents, over all its account countries. */
const stripeCurrencies = new Set([...stripeZeroDecimal, ...stripeThreeDecimal, ...stripeWholeHundredths, ...codes('USD AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BWP BYN BZD CAD '
  + 'CDF CHF CNY COP CRC CVE CZK DKK DOP DZD EGP ETB EUR FJD FKP GBP GEL GIP GMD GTQ GYD HKD HNL HTG '
  + 'HUF IDR ILS INR JMD KES KGS KHR KYD KZT LAK LBP LKR LRD LSL MAD MDL MKD MMK MNT MOP MUR MVR MWK '
  + 'MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SEK SGD '
  + 'SHP SLE SOS SRD SZL THB TJS TOP TRY TTD TWD TZS UAH UYU UZS WST XCD YER ZAR ZMW')])

function stripeUnits(code: string): ProviderUnits | undefined {
  if (!stripeCurrencies.has(code)) return undefined
  if (stripeZeroDecimal.has(code)) return { decimals: 0, charged: 0 }
  if (stripeThreeDecimal.has(code)) return { decimals: 3, charged: 2 }
  if (stripeWholeHundredths.has(code)) return { decimals: 2, charged: 0 }
  return { decimals: 2, charged: 2 }
}

export interface Currency {
  code: string
  /** ISO 4217 minor-unit exponent. */
  isoExponent: number
  /** Decimal places of this app's amounts: the ISO exponent, except IDR (whole rupiah). */
  appDecimals: number
  stripe?: ProviderUnits
  /** Midtrans charges IDR only; `gross_amount` is whole rupiah. */
  midtrans?: ProviderUnits
}

/** The one table: every currency an order may be in, with its units at each provider that takes it. */
export const currencies: ReadonlyMap<string, Currency> = new Map(Object.entries(isoCodesByExponent).flatMap(([exponent, list]) =>
  [...codes(list)].map((code): [string, Currency] => [code, {
    code,
    isoExponent: Number(exponent),
    appDecimals: code === 'IDR' ? 0 : Number(exponent),
    stripe: stripeUnits(code),
    midtrans: code === 'IDR' ? { decimals: 0, charged: 0 } : undefined,
  }])))

/**
 * An amount every provider pays back exactly in every currency: a multiple of the largest step any
 * currency can have (10 ** its app decimals, a provider charging it in whole units).
 */
const LARGEST_STEP = 10 ** Math.max(...[...currencies.values()].map(currency => currency.appDecimals))
export const exactEverywhere = (amount: number): boolean => amount % LARGEST_STEP === 0

/** Providers that convert; mockpay takes every amount as the order states it. */
type ConvertingProvider = Exclude<PaymentProviderName, 'mockpay'>
const providerLabel: Record<ConvertingProvider, string> = { stripe: 'Stripe', midtrans: 'Midtrans' }

const unitsAt = (provider: ConvertingProvider, currency: Currency | undefined) => currency?.[provider]

/** The places the provider's amounts are in, relative to the app's (negative: coarser). */
function shiftOf(provider: PaymentProviderName, code: string): number | undefined {
  if (provider === 'mockpay') return 0
  const currency = currencies.get(code)
  const units = unitsAt(provider, currency)
  return currency && units ? units.decimals - currency.appDecimals : undefined
}

/**
 * The order's amount in the provider's units: an ISK order of 5000 asks Stripe for 500000, an IDR
 * order of 150000 asks Stripe for 15000000 and Midtrans for 150000. A currency the provider's table
 * does not know goes as it is (the provider refuses it). Throws when no integer is exact (an MGA
 * amount in hundredths that is not whole ariary, for Stripe): currencyProblem refuses those orders.
 */
export function toProviderAmount(provider: PaymentProviderName, amount: number, currency: string): number {
  const shift = shiftOf(provider, currency.toUpperCase()) ?? 0
  if (shift >= 0) return amount * 10 ** shift
  const divisor = 10 ** -shift
  if (amount % divisor !== 0) throw new RangeError(`${amount} ${currency.toUpperCase()} has no exact amount in ${provider}'s units: ${currencyProblem(provider, amount, currency)}`)
  return amount / divisor
}

/**
 * A provider's amount in the app's units. Rounded down to whole app units: a payment of less than the
 * order never reads as the order's amount (Rp 149,999.50 is 149999), and one of less than a unit more
 * reads as it (the stored amount column is an integer).
 */
export function fromProviderAmount(provider: PaymentProviderName, amount: number, currency: string): number {
  const shift = shiftOf(provider, currency.toUpperCase()) ?? 0
  return shift >= 0 ? Math.floor(amount / 10 ** shift) : amount * 10 ** -shift
}

export const toStripeAmount = (amount: number, currency: string) => toProviderAmount('stripe', amount, currency)
export const fromStripeAmount = (amount: number, currency: string) => fromProviderAmount('stripe', amount, currency)

/** `amount` minor units written with the decimals (1234 with 3 → "1.234"), exactly, without floats. */
function major(amount: number, decimals: number): string {
  if (decimals === 0) return String(amount)
  const digits = String(amount).padStart(decimals + 1, '0')
  return `${digits.slice(0, -decimals)}.${digits.slice(-decimals)}`
}

/**
 * The step the provider charges and refunds `code` in, in app units (an MGA amount at Stripe moves in
 * 100s, a KWD amount in 10s), with its words for it; undefined when the provider does not take the
 * currency. mockpay takes every amount.
 */
function stepAt(provider: ConvertingProvider, code: string): { step: number, places: string, decimals: number } | undefined {
  const known = currencies.get(code)
  const units = unitsAt(provider, known)
  if (!known || !units) return undefined
  return {
    step: 10 ** Math.max(0, known.appDecimals - units.charged),
    places: units.charged === 0 ? 'whole units' : `${units.charged} decimal places`,
    decimals: known.appDecimals,
  }
}

/** The multiples of `step` either side of `amount` (only the one above when none is above 0). */
function nearestMultiples(amount: number, step: number): string {
  const below = amount - (amount % step)
  return below > 0 ? `${below} or ${below + step}` : `${step}`
}

/**
 * Why the configured provider cannot take this order as given, as a problem detail that says what to
 * do next; undefined when it can. mockpay takes everything.
 */
export function currencyProblem(provider: PaymentProviderName, amount: number, currency: string): string | undefined {
  if (provider === 'mockpay') return undefined
  const code = currency.toUpperCase()
  const units = stepAt(provider, code)
  if (!units) {
    return provider === 'midtrans'
      ? `Midtrans, the configured payment provider, charges in IDR only, not ${code}. Order in IDR, in whole rupiah.`
      : `Stripe, the configured payment provider, does not charge in ${code}. Order in a currency listed at https://docs.stripe.com/currencies, in its ISO 4217 minor unit (IDR in whole rupiah).`
  }
  // The app amount must be a multiple of the step for the provider to charge it without rounding.
  if (amount % units.step === 0) return undefined
  return `${providerLabel[provider]} charges ${code} to ${units.places}, so ${amount} (${major(amount, units.decimals)} ${code}) would be rounded. `
    + `Order an amount that is a multiple of ${units.step}, such as ${nearestMultiples(amount, units.step)}.`
}

/**
 * Why the order's provider cannot pay back this refund exactly, as a problem detail that says what to
 * ask instead; undefined when it can. The same steps as charging: Stripe refunds a zero-decimal
 * currency in whole units and a three-decimal one with a last digit of 0
 * (https://docs.stripe.com/currencies). `rest`: the amount is what remains, asked for without an
 * amount; the detail then names the largest amount that can be refunded. A currency the provider does
 * not take at all was refused when the order was placed, so nothing is said of it here.
 */
export function refundAmountProblem(provider: PaymentProviderName, amount: number, currency: string, { rest }: { rest: boolean }): string | undefined {
  if (provider === 'mockpay') return undefined
  const code = currency.toUpperCase()
  const units = stepAt(provider, code)
  if (!units || amount % units.step === 0) return undefined
  const granularity = `${providerLabel[provider]} refunds ${code} to ${units.places}`
  const written = `${amount} (${major(amount, units.decimals)} ${code})`
  if (!rest) {
    return `${granularity}, so ${written} cannot be refunded exactly. Ask for a multiple of ${units.step}, such as ${nearestMultiples(amount, units.step)}, under the same Idempotency-Key.`
  }
  const largest = amount - (amount % units.step)
  return `What remains to refund, ${written}, cannot be refunded exactly: ${granularity}. `
    + (largest > 0
      ? `Ask for "amount": ${largest}, under the same Idempotency-Key.`
      : `Nothing more can be refunded through ${providerLabel[provider]}; settle the rest with the shopper directly.`)
}
