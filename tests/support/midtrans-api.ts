/** The Midtrans stand-in, kept beside `npm run stand-in` in scripts/stand-ins; the suites import it from here. */
export * from '../../scripts/stand-ins/midtrans'
