import { nextTick, ref } from 'vue'
import { describeError, OpsRequestError } from './useOps'

/**
 * The form an operator opens under one row of a console list, one row at a time: which row's is
 * open, why what was typed was refused, and whether it is being sent. Opening it focuses its field,
 * the element with id `fieldId(rowId)`.
 */
export function useRowForm(fieldId: (rowId: string) => string) {
  const openFor = ref<string>()
  const error = ref<string>()
  const sending = ref(false)

  function open(rowId: string) {
    openFor.value = rowId
    error.value = undefined
    void nextTick(() => document.getElementById(fieldId(rowId))?.focus())
  }

  function close() {
    openFor.value = undefined
    error.value = undefined
  }

  /**
   * Sends the form, once at a time. A `refusal` (what is wrong with the input) is shown instead of
   * sending; a form sent closes; a failure is shown in it after `failed`, except a 401, which the
   * token form shows.
   */
  async function submit(refusal: string | undefined, send: () => Promise<void>, failed: string) {
    if (sending.value) return
    if (refusal) {
      error.value = refusal
      return
    }
    sending.value = true
    error.value = undefined
    try {
      await send()
      close()
    }
    catch (caught) {
      if (caught instanceof OpsRequestError && caught.status === 401) return
      error.value = `${failed}: ${describeError(caught)}`
    }
    finally {
      sending.value = false
    }
  }

  return { openFor, error, sending, open, close, submit }
}
