import { describe, expect, it } from 'vitest'
import { providerLinkFilter } from '../../server/payments/midtrans'

// The links of a Midtrans charge answer (`actions[].url`) become the order's payment.nextAction,
// which the checkout page renders as href: only Midtrans' own https links, a wallet app's deeplink,
// and the configured API base's origin (a stand-in or proxy) pass.

describe('providerLinkFilter (Midtrans action links)', () => {
  const production = providerLinkFilter(undefined)

  it('keeps https links on Midtrans\' sandbox and production hosts, and the legacy Veritrans ones', () => {
    for (const url of [
      'https://api.midtrans.com/v2/gopay/0b8bd7a3/qr-code',
      'https://api.sandbox.midtrans.com/v2/gopay/0b8bd7a3/qr-code',
      'https://simulator.sandbox.midtrans.com/gopay/partner/app/payment-pin?id=0b8bd7a3',
      'https://midtrans.com/',
      'https://app.sandbox.veritrans.co.id/snap/v2/vtweb/0b8bd7a3',
    ]) expect(production(url, 'generate-qr-code'), url).toBe(true)
  })

  it('drops script, data and plain-http links, other hosts, and hosts that only end like Midtrans\'', () => {
    for (const url of [
      'javascript:alert(document.cookie)',
      'JavaScript:alert(1)',
      'data:text/html,<script>alert(1)</script>',
      'http://api.midtrans.com/v2/gopay/0b8bd7a3/qr-code',
      'https://evil.example/qr-code',
      'https://evilmidtrans.com/qr-code',
      'https://api.midtrans.com.evil.example/qr-code',
      '//api.midtrans.com/relative',
      'not a url',
    ]) expect(production(url, 'generate-qr-code'), url).toBe(false)
  })

  it('keeps a wallet app deeplink only as the deeplink-redirect action', () => {
    const gojek = 'gojek://gopay/merchanttransfer?tref=0b8bd7a3&amount=150000&activity=GP:RR&callback_url='
    expect(production(gojek, 'deeplink-redirect')).toBe(true)
    expect(production('shopeeid://main?apprl=abc', 'deeplink-redirect')).toBe(true)
    expect(production(gojek, 'generate-qr-code')).toBe(false)
    expect(production('intent://evil#Intent;end', 'deeplink-redirect')).toBe(false)
  })

  it('keeps links on the configured API base\'s origin (the loopback stand-in), and no other port or host there', () => {
    const standIn = providerLinkFilter('http://127.0.0.1:4010')
    expect(standIn('http://127.0.0.1:4010/v2/gopay/0b8bd7a3/qr-code', 'generate-qr-code')).toBe(true)
    expect(standIn('http://127.0.0.1:4011/v2/gopay/0b8bd7a3/qr-code', 'generate-qr-code')).toBe(false)
    expect(standIn('http://localhost:4010/v2/gopay/0b8bd7a3/qr-code', 'generate-qr-code')).toBe(false)
    expect(standIn('https://api.sandbox.midtrans.com/v2/gopay/0b8bd7a3/qr-code', 'generate-qr-code')).toBe(true)
  })
})
