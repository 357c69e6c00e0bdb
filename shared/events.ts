/** An event as the API lists it and webhook endpoints receive it (docs/events.md). */

import type { z } from 'zod'
import type { EventSchema } from './api-schemas'

export type EventView = z.output<typeof EventSchema>
