// `npm run test:ledger -- --runs N [--seed S] [--path P] [--provider stripe|midtrans] [--time-limit SECONDS] [--no-shrink] [--keep-going] [--report FILE]`:
// the ledger model (tests/e2e/ledger-model.test.ts) with more sequences, another seed, or one
// failing path replayed. vitest refuses flags it does not know, so these reach the suite as
// LEDGER_MODEL_* variables. Extra arguments after `--` go to vitest.
import { spawn } from 'node:child_process'

const flags = {
  '--runs': 'LEDGER_MODEL_RUNS',
  '--seed': 'LEDGER_MODEL_SEED',
  '--path': 'LEDGER_MODEL_PATH',
  '--provider': 'LEDGER_MODEL_PROVIDERS',
  '--time-limit': 'LEDGER_MODEL_TIME_LIMIT_S',
  '--report': 'LEDGER_MODEL_REPORT',
  '--sequence': 'LEDGER_MODEL_SEQUENCE',
}

/** --no-shrink: report a failing sequence as drawn; --keep-going: run all sequences, then list every failing one. */
const switches = {
  '--no-shrink': { LEDGER_MODEL_SHRINK: '0' },
  '--keep-going': { LEDGER_MODEL_KEEP_GOING: '1', LEDGER_MODEL_SHRINK: '0' },
}

function parseArguments(argv) {
  const separator = argv.indexOf('--')
  const own = separator < 0 ? argv : argv.slice(0, separator)
  const env = {}
  for (let index = 0; index < own.length; index++) {
    const [name, inline] = own[index].split('=', 2)
    if (switches[name]) {
      Object.assign(env, switches[name])
      continue
    }
    if (!flags[name]) throw new Error(`unknown option ${own[index]}: one of ${[...Object.keys(flags), ...Object.keys(switches)].join(', ')}`)
    const value = inline ?? own[++index]
    if (value === undefined) throw new Error(`${name} needs a value`)
    env[flags[name]] = value
  }
  return { env, vitestArgs: separator < 0 ? [] : argv.slice(separator + 1) }
}

const { env, vitestArgs } = parseArguments(process.argv.slice(2))
const child = spawn('npx', ['vitest', 'run', '--project', 'e2e', 'tests/e2e/ledger-model.test.ts', ...vitestArgs], { stdio: 'inherit', env: { REQUIRE_SERVICES: '1', ...process.env, ...env } })
child.once('close', code => process.exit(code ?? 1))
