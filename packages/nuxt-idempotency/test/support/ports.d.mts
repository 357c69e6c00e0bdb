/** A free TCP port on 127.0.0.1. */
export function freePort(): Promise<number>
/** Whether something accepts a TCP connection on 127.0.0.1:port now. */
export function acceptsConnections(port: number): Promise<boolean>
