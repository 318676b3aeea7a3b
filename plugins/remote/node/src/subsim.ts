// Where a game's batched sub-simulations run (GameSpec.subSim, Game.stepBegin / stepEnd): in this
// thread (the game's own simulator), or in a batched simulator service over a Unix socket
// (``--combat batched:PATH``), one blocking exchange per env request for all of a batch's inputs.
//
// The exchange is synchronous (native/shm.cc: sockConnect / sockExchange): a step is synchronous
// code in a worker thread (which blocks in its doorbell wait anyway) or, without workers, in the
// main thread, which then serves nothing else while the service computes.

import { SubSimSpec } from "./game";
import { shmAddon } from "./native";
import { ErrorCode, HEADER_SIZE, MsgType } from "./protocol";

export interface SubSimRunner {
  /** Results of ``inputs`` in order (each ``subSim.resultInts`` long). Throws when it cannot. */
  run(inputs: Int32Array[]): Int32Array[];
}

/** The message of docs/protocol.md section 6: a batch of fights for the batched combat service. */
export const MSG_FIGHTS = 10;

/** ``--combat``: ``local`` (null), or ``batched:PATH`` (the service's socket path). */
export function parseCombat(value: string): string | null {
  if (value === "local") return null;
  if (value.startsWith("batched:") && value.length > "batched:".length) return value.slice("batched:".length);
  throw new Error(`--combat ${value}; accepted: local, batched:PATH (the Unix socket of python -m meeple_autobattler.combat_server)`);
}

/** The batched simulator service at ``path``: connects on first use, then one frame out and one
 *  frame back per batch; ``timeoutMs`` bounds each exchange. */
export class ServiceRunner implements SubSimRunner {
  private fd = -1;
  private msgId = 0;

  constructor(readonly path: string, readonly sub: SubSimSpec, readonly timeoutMs = 30000) {
    // connect now, so the service sees its clients from the start (--exit-with-clients); a
    // service not there yet is retried at the first batch, which fails with the reason
    try {
      this.fd = shmAddon().sockConnect(path, timeoutMs);
    } catch {
      this.fd = -1;
    }
  }

  run(inputs: Int32Array[]): Int32Array[] {
    const addon = shmAddon();
    const n = inputs.length;
    // the frame starts 3 bytes into its buffer, so the int32s after header and count are aligned
    const frameLen = HEADER_SIZE + 4 + 4 * n * this.sub.inputInts;
    const frame = Buffer.from(new ArrayBuffer(3 + frameLen), 3, frameLen);
    this.msgId = (this.msgId + 1) >>> 0;
    frame.writeUInt8(MSG_FIGHTS, 0);
    frame.writeUInt32LE(this.msgId, 1);
    frame.writeUInt32LE(frame.length - HEADER_SIZE, 5);
    frame.writeUInt32LE(n, HEADER_SIZE);
    const body = new Int32Array(frame.buffer, frame.byteOffset + HEADER_SIZE + 4, n * this.sub.inputInts);
    inputs.forEach((x, k) => body.set(x, k * this.sub.inputInts));
    let reply: Buffer;
    try {
      if (this.fd < 0) this.fd = addon.sockConnect(this.path, this.timeoutMs);
      reply = Buffer.from(addon.sockExchange(this.fd, frame, this.timeoutMs));
    } catch (err) {
      this.close();
      throw new Error(`the batched ${this.sub.name} service at ${this.path} failed: ${(err as Error).message} `
        + "(is python -m meeple_autobattler.combat_server still running there?)");
    }
    const [type, id, len] = [reply.readUInt8(0), reply.readUInt32LE(1), reply.readUInt32LE(5)];
    if (type === MsgType.ERROR) {
      this.close();
      const code = reply.readUInt16LE(HEADER_SIZE);
      const text = reply.toString("utf8", HEADER_SIZE + 2);
      throw new Error(`the batched ${this.sub.name} service at ${this.path} answered ERROR ${ErrorCode[code] ?? code}: ${text}`);
    }
    const want = 4 * n * this.sub.resultInts;
    if (type !== MSG_FIGHTS || id !== this.msgId || len !== want) {
      this.close();
      throw new Error(`the batched ${this.sub.name} service at ${this.path} answered msg_type ${type} id ${id} with ${len} bytes; `
        + `expected msg_type ${MSG_FIGHTS} id ${this.msgId} with ${want} bytes`);
    }
    const flat = new Int32Array(reply.buffer.slice(reply.byteOffset + HEADER_SIZE, reply.byteOffset + HEADER_SIZE + want));
    return Array.from({ length: n }, (_, k) => flat.subarray(k * this.sub.resultInts, (k + 1) * this.sub.resultInts));
  }

  close(): void {
    if (this.fd >= 0) shmAddon().sockClose(this.fd);
    this.fd = -1;
  }
}

/** The runner for server option ``combat`` (``local`` or ``batched:PATH``); null: the game's own. */
export function makeRunner(combat: string, sub: SubSimSpec | undefined, timeoutMs: number): SubSimRunner | null {
  const path = parseCombat(combat);
  if (path === null) return null;
  if (sub === undefined) throw new Error(`--combat ${combat}: this game has no batched sub-simulations (GameSpec.subSim)`);
  return new ServiceRunner(path, sub, timeoutMs);
}
