// The shared-memory segment of docs/protocol.md section 4, byte for byte the one of
// meeple.transport.shm: its layout, the spin-yield-futex waits, the client side the server's
// main thread uses for socket/HTTP frames when its envs live in workers (ShmDriver), and the
// crash recovery of segments and socket files left by dead servers.

import * as crypto from "crypto";
import * as fs from "fs";
import * as net from "net";
import * as os from "os";
import * as path from "path";
import { shmAddon } from "./native";
import {
  encodeSpaces, decodeSpaces, ErrorCode, Layout, layout, MsgType, ProtocolError, roundUp, Spaces,
} from "./protocol";

export const SHM_MAGIC = 0x4853504d; // "MPSH"
export const SHM_VERSION = 1;
export const SHM_DIR = "/dev/shm";
export const CONTROL_SIZE = 64;
export const WORKER_BLOCK = 320;
export const ERROR_TEXT = 224;
export const STATE_STARTING = 0;
export const STATE_READY = 1;
export const STATE_CLOSING = 2;
export const LIVENESS_EVERY = 256; // busy peers check each other every this many requests
const SLICE_NS = 10e6; // a futex wait wakes at least this often to check its peer

/** Byte offsets inside a worker block. */
export const W = {
  doorbell: 0, workerSleeping: 4, envErrors: 8, done: 64, clientSleeping: 68, firstSlot: 72,
  numSlots: 76, pid: 80, errorCode: 84, errorLen: 86, steps: 88, text: 96,
} as const;
/** Byte offsets inside a slot. */
export const S = { reqSeq: 0, respSeq: 4, command: 8, status: 9, flags: 10, seed: 16, actions: 24 } as const;
/** Bits of a slot's flags byte: RESET carries a seed; OBSERVE wants one record per seat. */
export const FLAG_HAS_SEED = 1;
export const FLAG_ALL_SEATS = 2;

/** The segment of the server listening at ``address`` (the same name meeple.transport.shm gives). */
export function segmentName(address: string): string {
  return "meeple-" + crypto.createHash("sha1").update(path.resolve(address)).digest("hex").slice(0, 16);
}

export class SegmentLayout {
  readonly workersOffset = CONTROL_SIZE;
  readonly spacesBlob: Buffer;
  readonly spacesOffset: number;
  readonly slotsOffset: number;
  readonly recordsOffset: number;
  readonly slotSize: number;
  readonly size: number;
  readonly record: Layout;

  constructor(readonly spaces: Spaces, readonly numWorkers: number) {
    this.spacesBlob = encodeSpaces(spaces);
    this.record = layout(spaces);
    this.spacesOffset = this.workersOffset + numWorkers * WORKER_BLOCK;
    this.slotsOffset = roundUp(this.spacesOffset + this.spacesBlob.length, 64);
    this.recordsOffset = roundUp(24 + 4 * spaces.numSeats, 8);
    this.slotSize = roundUp(this.recordsOffset + spaces.numSeats * this.record.recordSize, 64);
    this.size = this.slotsOffset + spaces.numEnvs * this.slotSize;
  }

  worker(w: number): number {
    return this.workersOffset + w * WORKER_BLOCK;
  }

  slot(i: number): number {
    return this.slotsOffset + i * this.slotSize;
  }
}

/** One mapping of a segment in this thread (every worker thread maps it itself). */
export class Segment {
  readonly buf: Buffer;
  readonly u32: Uint32Array;
  readonly i32: Int32Array;

  private constructor(readonly name: string, readonly ab: ArrayBuffer, readonly lay: SegmentLayout) {
    this.buf = Buffer.from(ab);
    this.u32 = new Uint32Array(ab);
    this.i32 = new Int32Array(ab);
  }

  static create(name: string, spaces: Spaces, numWorkers: number): Segment {
    const lay = new SegmentLayout(spaces, numWorkers);
    const seg = new Segment(name, shmAddon().create(name, lay.size), lay);
    const b = seg.buf;
    b.writeUInt32LE(SHM_MAGIC, 0);
    b.writeUInt16LE(SHM_VERSION, 4);
    b.writeUInt16LE(spaces.numSeats, 6);
    b.writeUInt32LE(spaces.numEnvs, 8);
    b.writeUInt32LE(spaces.numActions, 12);
    b.writeUInt32LE(lay.record.obsCount * lay.record.obsItem, 16);
    b.writeUInt32LE(lay.record.recordSize, 20);
    b.writeUInt32LE(lay.slotSize, 24);
    b.writeUInt32LE(lay.slotsOffset, 28);
    b.writeUInt32LE(process.pid, 32);
    b.writeUInt32LE(STATE_STARTING, 36);
    b.writeUInt32LE(numWorkers, 40);
    b.writeUInt32LE(lay.workersOffset, 44);
    b.writeUInt32LE(lay.spacesOffset, 48);
    b.writeUInt32LE(lay.spacesBlob.length, 52);
    lay.spacesBlob.copy(b, lay.spacesOffset);
    return seg;
  }

  static open(name: string): Segment {
    const ab = shmAddon().open(name);
    const b = Buffer.from(ab);
    if (b.readUInt32LE(0) !== SHM_MAGIC || b.readUInt16LE(4) !== SHM_VERSION) {
      throw new ProtocolError(ErrorCode.VERSION, `${SHM_DIR}/${name}: not a version ${SHM_VERSION} meeple segment`);
    }
    const spaces = decodeSpaces(b.subarray(b.readUInt32LE(48), b.readUInt32LE(48) + b.readUInt32LE(52)));
    return new Segment(name, ab, new SegmentLayout(spaces, b.readUInt32LE(40)));
  }

  get state(): number {
    return Atomics.load(this.u32, 9);
  }

  set state(value: number) {
    Atomics.store(this.u32, 9, value);
  }

  /** The u32 at byte offset ``at``. */
  word(at: number): number {
    return Atomics.load(this.u32, at >>> 2);
  }

  setWord(at: number, value: number): void {
    Atomics.store(this.u32, at >>> 2, value);
  }

  setError(w: number, code: number, text: string): void {
    const at = this.lay.worker(w);
    let raw = Buffer.from(text, "utf8");
    if (raw.length > ERROR_TEXT) raw = raw.subarray(0, ERROR_TEXT);
    raw.copy(this.buf, at + W.text);
    this.buf.writeUInt16LE(code, at + W.errorCode);
    this.buf.writeUInt16LE(raw.length, at + W.errorLen);
  }

  error(w: number): [number, string] {
    const at = this.lay.worker(w);
    const n = this.buf.readUInt16LE(at + W.errorLen);
    return [this.buf.readUInt16LE(at + W.errorCode), this.buf.toString("utf8", at + W.text, at + W.text + n)];
  }

  /** HEALTH's counters, summed over the workers. */
  counters(): { steps: number; envErrors: number } {
    let steps = 0;
    let envErrors = 0;
    for (let w = 0; w < this.lay.numWorkers; w++) {
      steps += Number(this.buf.readBigUInt64LE(this.lay.worker(w) + W.steps));
      envErrors += this.word(this.lay.worker(w) + W.envErrors);
    }
    return { steps, envErrors };
  }
}

// -- waits ---------------------------------------------------------------------------------------

/** ``spinUs`` of pure spinning, then ``yieldUs`` of spinning with sched_yield, then futex
 *  (transport.spin_us / yield_us of meeple's config; the same defaults). */
export interface WaitPolicy { spinUs: number; yieldUs: number; timeoutS: number }
export const DEFAULT_POLICY: WaitPolicy = { spinUs: 20, yieldUs: 200, timeoutS: 30 };

/** Adaptive spinning, meeple.transport.waiting.SpinBudget: a wait that ends while spinning
 *  doubles the budget (up to the policy's), one that blocks halves it, down to none; at none,
 *  every 64th wait probes with 1/16 of it. Idle or oversubscribed waiters soon block at once. */
export class SpinBudget {
  static readonly MIN = 1 / 16;
  scale = 1;
  private waits = 0;

  spun(): void {
    this.scale = Math.min(1, Math.max(this.scale * 2, SpinBudget.MIN));
  }

  blocked(): void {
    this.scale = this.scale > SpinBudget.MIN ? this.scale / 2 : 0;
  }

  nextScale(): number {
    this.waits += 1;
    return this.scale === 0 && this.waits % 64 === 0 ? SpinBudget.MIN : this.scale;
  }
}

/** The peer is gone (its reason); a wait that ran past its deadline. */
export class PeerGone extends Error {}
export class WaitTimeout extends Error {}

/** Wait until ``ready(word at ``at``)``; returns the word. Spins, yields, then blocks on the futex
 *  in 10 ms slices, flagging ``sleepingAt`` so the peer wakes it, and asking ``alive()`` (why the
 *  peer is gone, or null) after each slice. Throws PeerGone or WaitTimeout. */
export function waitFor(seg: Segment, at: number, sleepingAt: number, ready: (v: number) => boolean,
  policy: WaitPolicy, budget: SpinBudget, alive: () => string | null, timeoutS = policy.timeoutS): number {
  let v = seg.word(at);
  if (ready(v)) return v;
  const addon = shmAddon();
  const start = performance.now();
  const scale = budget.nextScale();
  for (let phase = 0; phase < 2; phase++) {
    const ns = (phase === 0 ? policy.spinUs : policy.yieldUs) * scale * 1e3;
    if (ns <= 0) continue;
    const end = performance.now() + ns / 1e6;
    for (let left = ns; left > 0; left = (end - performance.now()) * 1e6) {
      v = addon.spin(seg.ab, at, v, left, phase === 1);
      if (ready(v)) {
        budget.spun();
        return v;
      }
    }
  }
  if (scale > 0) budget.blocked();
  const deadline = start + timeoutS * 1e3;
  for (;;) {
    v = addon.sleep(seg.ab, at, v, SLICE_NS, sleepingAt);
    if (ready(v)) return v;
    const gone = alive();
    if (gone) throw new PeerGone(gone);
    if (performance.now() > deadline) throw new WaitTimeout(`no answer within ${timeoutS} s`);
  }
}

// -- the server's own client of its workers ------------------------------------------------------

/** Drives the workers through the segment, for requests that arrive as socket or HTTP frames
 *  (the main thread is then the segment's client; SHM_ATTACH clients drive it directly). */
export class ShmDriver {
  private budgets: SpinBudget[];
  private seqs: number[];

  constructor(readonly seg: Segment, readonly policy: WaitPolicy, private failure: () => string | null) {
    this.budgets = Array.from({ length: seg.lay.numWorkers }, () => new SpinBudget());
    this.seqs = new Array(seg.lay.numWorkers).fill(0);
  }

  /** Wait out a request a previous client left in flight (a new driver starts clean). */
  sync(): void {
    for (let w = 0; w < this.seg.lay.numWorkers; w++) this.wait(w, this.seg.word(this.seg.lay.worker(w) + W.doorbell));
  }

  private wait(w: number, seq: number): void {
    const at = this.seg.lay.worker(w);
    try {
      waitFor(this.seg, at + W.done, at + W.clientSleeping, (v) => v === seq, this.policy, this.budgets[w],
        () => this.failure() ?? (this.seg.state === STATE_CLOSING ? "the env server is shutting down" : null));
    } catch (err) {
      if (err instanceof PeerGone) throw new ProtocolError(ErrorCode.INTERNAL, err.message);
      if (err instanceof WaitTimeout) {
        throw new ProtocolError(ErrorCode.INTERNAL, `env worker ${w}: ${err.message} (--timeout-s ${this.policy.timeoutS})`);
      }
      throw err;
    }
  }

  /** One env command through every worker; records stay in the slots (copyRecords reads them). */
  request(command: MsgType, actions: Int32Array | null, seed: bigint | null, allSeats: boolean): void {
    const { seg } = this;
    const lay = seg.lay;
    const n = lay.spaces.numEnvs;
    const seats = lay.spaces.numSeats;
    const flags = (seed !== null ? FLAG_HAS_SEED : 0) | (allSeats ? FLAG_ALL_SEATS : 0);
    for (let i = 0; i < n; i++) {
      const at = lay.slot(i);
      seg.buf[at + S.command] = command;
      seg.buf[at + S.flags] = flags;
      if (command === MsgType.RESET) seg.buf.writeBigUInt64LE(seed === null ? 0n : BigInt.asUintN(64, seed), at + S.seed);
      if (actions !== null) {
        const perEnv = command === MsgType.STEP_MULTI ? seats : 1;
        for (let k = 0; k < seats; k++) seg.i32[((at + S.actions) >>> 2) + k] = actions[i * perEnv + (perEnv === 1 ? 0 : k)];
      }
    }
    const addon = shmAddon();
    for (let w = 0; w < lay.numWorkers; w++) {
      const at = lay.worker(w);
      const seq = (seg.word(at + W.doorbell) + 1) >>> 0;
      const first = seg.word(at + W.firstSlot);
      const count = seg.word(at + W.numSlots);
      for (let i = first; i < first + count; i++) seg.setWord(lay.slot(i) + S.reqSeq, seq);
      this.seqs[w] = seq;
      addon.publish(seg.ab, at + W.doorbell, seq, at + W.workerSleeping);
    }
    for (let w = 0; w < lay.numWorkers; w++) this.wait(w, this.seqs[w]);
    for (let w = 0; w < lay.numWorkers; w++) {
      const [code, text] = seg.error(w);
      if (code) throw new ProtocolError(code, text);
    }
  }

  /** The last request's records, packed (``perEnv`` records per env) into ``out`` at ``base``. */
  copyRecords(perEnv: number, out: Buffer, base: number): void {
    const lay = this.seg.lay;
    const bytes = perEnv * lay.record.recordSize;
    for (let i = 0; i < lay.spaces.numEnvs; i++) {
      const from = lay.slot(i) + lay.recordsOffset;
      this.seg.buf.copy(out, base + i * bytes, from, from + bytes);
    }
  }
}

// -- crash recovery ------------------------------------------------------------------------------

/** Whether process ``pid`` runs (a zombie does not). */
export function pidAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no /proc: kill(2) said it exists
  }
}

/** server_pid of segment ``name``: null if there is none, 0 while one is being created. */
export function segmentServerPid(name: string): number | null {
  let fd: number;
  try {
    fd = fs.openSync(path.join(SHM_DIR, name), "r");
  } catch {
    return null;
  }
  try {
    const head = Buffer.alloc(CONTROL_SIZE);
    return fs.readSync(fd, head, 0, CONTROL_SIZE, 0) === CONTROL_SIZE ? head.readUInt32LE(32) : 0;
  } finally {
    fs.closeSync(fd);
  }
}

function unlinkSegment(name: string): void {
  fs.rmSync(path.join(SHM_DIR, name), { force: true });
}

/** Remove every /dev/shm/meeple-* segment whose server died (leftovers at addresses nobody reuses). */
export function sweepStaleSegments(): string[] {
  const removed: string[] = [];
  if (!fs.existsSync(SHM_DIR)) return removed;
  for (const name of fs.readdirSync(SHM_DIR)) {
    if (!name.startsWith("meeple-")) continue;
    const pid = segmentServerPid(name);
    if (pid && !pidAlive(pid)) {
      unlinkSegment(name);
      removed.push(name);
    }
  }
  return removed;
}

export const STALE_SOCKET_MS = 60_000;

/** The default socket folder, $TMPDIR/meeple-<uid> (meeple.transport.launch.default_folder). */
export function defaultFolder(): string {
  return path.join(os.tmpdir(), `meeple-${process.getuid?.() ?? 0}`);
}

/** Socket files in the default folder older than 60 s that refuse connections (killed servers). */
export async function sweepStaleSockets(folder = defaultFolder()): Promise<string[]> {
  if (!fs.existsSync(folder)) return [];
  const stale = fs.readdirSync(folder).map((n) => path.join(folder, n)).filter((p) => {
    try {
      return p.endsWith(".sock") && Date.now() - fs.statSync(p).mtimeMs >= STALE_SOCKET_MS;
    } catch {
      return false;
    }
  });
  const removed: string[] = [];
  await Promise.all(stale.map((p) => new Promise<void>((resolve) => {
    const probe = net.connect(p);
    probe.on("connect", () => { probe.destroy(); resolve(); });
    probe.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNREFUSED" || err.code === "ENOENT") {
        fs.rmSync(p, { force: true });
        removed.push(p);
      }
      resolve();
    });
  })));
  return removed;
}

/** Remove the segment a crashed server left under ``name``; refuse one whose server runs. */
export function claimSegment(name: string): void {
  const pid = segmentServerPid(name);
  if (pid === null) return;
  if (pid !== process.pid && pidAlive(pid)) {
    throw new Error(`shared-memory segment ${name} belongs to the running server pid ${pid}; stop it or choose another --address`);
  }
  console.error(`meeple-node: removing stale shared-memory segment ${name} left by dead server pid ${pid}`);
  unlinkSegment(name);
}
