// A worker_threads pool over a shared-memory segment: worker w owns slots
// first_slot .. first_slot + num_slots - 1 (disjoint) and serves their doorbell (worker.ts).
// Clients that attached the segment drive the workers directly; frames that arrive on a socket or
// HTTP connection go through the main thread's ShmDriver.

import * as path from "path";
import { Worker } from "worker_threads";
import { spacesOf } from "./envbatch";
import { GameSpec } from "./game";
import { GAMES } from "./games";
import { shmAddon } from "./native";
import { Segment, ShmDriver, STATE_CLOSING, STATE_READY, W, WaitPolicy } from "./shm";

/** Which game to host: a name of games/index.ts, or a module exporting ``game`` (a GameSpec). */
export interface GameRef { name: string; module: string | null }

export function resolveGame(ref: GameRef): GameSpec {
  if (ref.module === null) {
    const spec = GAMES[ref.name];
    if (spec === undefined) throw new Error(`--game ${ref.name}; accepted: ${Object.keys(GAMES).join(", ")}`);
    return spec;
  }
  // eslint-disable-next-line @typescript-eslint/no-var-requires
  const mod = require(path.resolve(ref.module));
  const spec = (mod.game ?? mod.default) as GameSpec | undefined;
  if (!spec || typeof spec.create !== "function") {
    throw new Error(`--game-module ${ref.module} exports no GameSpec as 'game' (or default)`);
  }
  return spec;
}

/** What a worker thread is told (workerData). */
export interface WorkerConfig { segment: string; worker: number; game: GameRef; policy: WaitPolicy; combat: string }

export class WorkerPool {
  readonly driver: ShmDriver;
  private workers: Worker[] = [];
  private failure: string | null = null;
  private closing = false;
  private onDeath: ((what: string) => void) | null = null;

  private constructor(readonly seg: Segment, readonly policy: WaitPolicy, readonly combat: string) {
    this.driver = new ShmDriver(seg, policy, () => this.failure);
  }

  /** Create segment ``name`` for ``numEnvs`` envs of ``spec`` and start ``numWorkers`` workers;
   *  resolves once every worker built its envs (its error text if one could not). */
  static async start(spec: GameSpec, game: GameRef, numEnvs: number, numWorkers: number, name: string,
    policy: WaitPolicy, combat = "local"): Promise<WorkerPool> {
    if (!(Number.isInteger(numWorkers) && numWorkers >= 1 && numWorkers <= numEnvs)) {
      throw new Error(`--num-workers ${numWorkers} must be between 1 and --num-envs ${numEnvs}`);
    }
    const seg = Segment.create(name, spacesOf(spec, numEnvs), numWorkers);
    const pool = new WorkerPool(seg, policy, combat);
    try {
      await Promise.all(Array.from({ length: numWorkers }, (_, w) => pool.spawn(w, game)));
    } catch (err) {
      await pool.close();
      throw err;
    }
    seg.state = STATE_READY;
    return pool;
  }

  private spawn(w: number, game: GameRef): Promise<void> {
    const { seg } = this;
    const n = seg.lay.spaces.numEnvs;
    const workers = seg.lay.numWorkers;
    const first = Math.floor((w * n) / workers); // numpy.linspace's split, as meeple's server
    const at = seg.lay.worker(w);
    seg.setWord(at + W.firstSlot, first);
    seg.setWord(at + W.numSlots, Math.floor(((w + 1) * n) / workers) - first);
    const config: WorkerConfig = { segment: seg.name, worker: w, game, policy: this.policy, combat: this.combat };
    const worker = new Worker(path.join(__dirname, "worker.js"), { workerData: config });
    this.workers[w] = worker;
    return new Promise((resolve, reject) => {
      let ready = false;
      worker.once("message", () => {
        ready = true;
        resolve();
      });
      worker.on("error", (err) => {
        if (!ready) reject(new Error(seg.error(w)[1] || `env worker ${w} failed while starting: ${err.message}`));
      });
      worker.on("exit", (code) => {
        if (!ready) reject(new Error(seg.error(w)[1] || `env worker ${w} exited with code ${code} while starting`));
        else if (!this.closing) this.died(w, code);
      });
    });
  }

  /** ``callback(what)`` once, when a worker thread ends while the server runs. */
  watch(callback: (what: string) => void): void {
    this.onDeath = callback;
  }

  private died(w: number, code: number): void {
    const [, text] = this.seg.error(w);
    this.failure = `env worker ${w} (thread ${this.workers[w].threadId}) exited with code ${code}${text ? `: ${text}` : ""}`;
    this.seg.state = STATE_CLOSING; // the other workers and every client stop waiting
    this.onDeath?.(this.failure);
  }

  health(): { steps: number; envErrors: number } {
    return this.seg.counters();
  }

  /** Stop the workers (they see the closing state at their next wake-up) and remove the segment. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const { seg } = this;
    seg.state = STATE_CLOSING;
    const addon = shmAddon();
    for (let w = 0; w < seg.lay.numWorkers; w++) addon.wake(seg.ab, seg.lay.worker(w) + W.doorbell);
    addon.unlink(seg.name);
    await Promise.all(this.workers.filter(Boolean).map((worker) => new Promise<void>((resolve) => {
      const timer = setTimeout(() => void worker.terminate().then(() => resolve()), 2000);
      worker.once("exit", () => {
        clearTimeout(timer);
        resolve();
      });
      if (worker.threadId < 0) resolve();
    })));
  }
}
