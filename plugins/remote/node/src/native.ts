// The shared-memory addon (native/shm.cc, built by scripts/build-native.js into build/): loaded on
// first use, so the socket and HTTP transports without workers run without it (unless
// --combat batched:PATH, whose blocking socket calls live there too).

import * as path from "path";

export interface ShmAddon {
  /** A new segment /dev/shm/<name> (O_CREAT | O_EXCL, 0600) of ``size`` bytes, mapped. */
  create(name: string, size: number): ArrayBuffer;
  /** An existing segment, mapped whole. */
  open(name: string): ArrayBuffer;
  /** Remove /dev/shm/<name>; false if it was already gone. */
  unlink(name: string): boolean;
  /** Spin (sched_yield between reads if ``yieldCpu``) until the u32 at byte ``offset`` differs
   *  from ``value`` or ``ns`` have passed; returns the word. */
  spin(buf: ArrayBuffer, offset: number, value: number, ns: number, yieldCpu: boolean): number;
  /** Set the u32 flag at ``sleepingOffset``, FUTEX_WAIT while the word is ``value`` (at most
   *  ``ns``), clear the flag; returns the word. */
  sleep(buf: ArrayBuffer, offset: number, value: number, ns: number, sleepingOffset: number): number;
  /** Store ``value`` (seq_cst), then FUTEX_WAKE the word if the flag at ``sleepingOffset`` is set. */
  publish(buf: ArrayBuffer, offset: number, value: number, sleepingOffset: number): boolean;
  /** FUTEX_WAKE every waiter on the word. */
  wake(buf: ArrayBuffer, offset: number): void;
  /** A blocking client socket connected to the Unix socket ``path``; returns its fd. */
  sockConnect(path: string, timeoutMs: number): number;
  /** Write all of ``frame``, read one reply frame (docs/protocol.md header) whole; at most
   *  ``timeoutMs`` in all. Throws on a timeout, a closed connection or a socket error. */
  sockExchange(fd: number, frame: Uint8Array, timeoutMs: number): ArrayBuffer;
  sockClose(fd: number): void;
}

let addon: ShmAddon | null = null;

export function shmAddon(): ShmAddon {
  if (addon === null) {
    const file = path.join(__dirname, "..", "build", "meeple_shm.node");
    try {
      addon = require(file) as ShmAddon;
    } catch (err) {
      throw new Error(`the shared-memory addon ${file} cannot be loaded (${(err as Error).message}); `
        + "build it with `npm run build` (needs a C++17 compiler, g++ by default)");
    }
  }
  return addon;
}
