/**
 * Amounts are integers in each currency's unit as this app counts it (SPEC §4): for IDR the rupiah,
 * as shoppers and Midtrans count it. Stripe counts IDR as a two-decimal currency, in hundredths of a
 * rupiah, so its amounts are converted at the boundary, both ways: a PaymentIntent for an order of
 * Rp 150,000 asks for 15000000, and an event saying 15000000 paid the order's 150000.
 */
const stripeUnitsPerAppUnit = new Map<string, number>([['IDR', 100]])

const factorOf = (currency: string) => stripeUnitsPerAppUnit.get(currency.toUpperCase()) ?? 1

export const toStripeAmount = (amount: number, currency: string) => amount * factorOf(currency)

/**
 * Rounded down to whole units: a payment of less than the order never reads as the order's amount
 * (Rp 149,999.50 is 149999), and one of up to a unit more reads as it (the stored amount column is an integer).
 */
export const fromStripeAmount = (amount: number, currency: string) => Math.floor(amount / factorOf(currency))
