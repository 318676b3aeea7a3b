// The host library's server: any game of games/index.ts (or of a module, --game-module) over the
// socket (binary frames on a Unix socket, created 0600), HTTP (JSON on 127.0.0.1) and shared-memory
// (a /dev/shm segment, 0600, with the Unix socket as control plane) transports of docs/protocol.md.
//
//   node dist/server.js --game connect4|autobattler --transport socket|http|shm
//       --address PATH|127.0.0.1:PORT --num-envs N [--num-workers W] [--spin-us 20 --yield-us 200]
//       [--combat local|batched:PATH]
//
// --num-workers W > 0 steps the envs in W worker_threads, each owning disjoint slots of a
// shared-memory segment (pool.ts, worker.ts); shm needs W >= 1 (default 1). Socket and HTTP frames
// then reach the workers through the same segment (the main thread is its client). One client
// drives the envs at a time (the first to RESET or SHM_ATTACH) until it sends CLOSE or its
// connection closes (a client that dies releases them). At start the server removes segments and
// socket files of dead servers; SIGINT/SIGTERM stop the workers and remove the socket file and the
// segment. A worker thread that dies shuts the server down (exit code 1), as meeple's server does.
// --combat batched:PATH sends the sub-simulations (the auto-battler's fights) of every env request
// to a batched simulator service at PATH, one exchange per request and worker (subsim.ts).

import * as fs from "fs";
import * as http from "http";
import * as net from "net";
import { EnvBatch, spacesOf } from "./envbatch";
import { GameSpec } from "./game";
import { GameRef, resolveGame, WorkerPool } from "./pool";
import {
  decodeHelloRequest, decodeReset, encodeError, encodeFrame, encodeHealth, encodeHelloReply, encodeName,
  encodeSpaces, ErrorCode, HEADER_SIZE, layout, Layout, MsgType, ProtocolError, readRecords, recordsJson, Spaces, spacesJson, VERSION,
} from "./protocol";
import { makeRunner, parseCombat } from "./subsim";
import { claimSegment, DEFAULT_POLICY, segmentName, sweepStaleSegments, sweepStaleSockets, WaitPolicy } from "./shm";

interface Options {
  game: GameRef; transport: string; address: string; numEnvs: number; numWorkers: number; maxBody: number;
  frameTimeoutMs: number; parentPid: number; policy: WaitPolicy; combat: string;
}

const OPTIONS = [
  "--game", "--game-module", "--transport", "--address", "--num-envs", "--num-workers", "--max-body", "--frame-timeout-ms",
  "--spin-us", "--yield-us", "--timeout-s", "--parent-pid", "--combat",
];

function parseArgs(argv: string[]): Options {
  const opts: Options = {
    game: { name: "connect4", module: null }, transport: "socket", address: "", numEnvs: 8, numWorkers: -1,
    maxBody: 64 * 1024 * 1024, frameTimeoutMs: 5000, parentPid: 0, policy: { ...DEFAULT_POLICY }, combat: "local",
  };
  const number = (key: string, value: string, min: number): number => {
    const v = Number(value);
    if (!(value.trim() !== "" && Number.isFinite(v) && v >= min)) throw new Error(`${key} ${value}; expected a number >= ${min}`);
    return v;
  };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (!OPTIONS.includes(key)) throw new Error(`unknown option ${key}; accepted: ${OPTIONS.join(" ")}`);
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === "--game") opts.game.name = value;
    else if (key === "--game-module") opts.game = { name: value, module: value };
    else if (key === "--transport") opts.transport = value;
    else if (key === "--address") opts.address = value;
    else if (key === "--num-envs") opts.numEnvs = number(key, value, 1);
    else if (key === "--num-workers") opts.numWorkers = number(key, value, 0);
    else if (key === "--max-body") opts.maxBody = number(key, value, 0);
    else if (key === "--frame-timeout-ms") opts.frameTimeoutMs = number(key, value, 1);
    else if (key === "--spin-us") opts.policy.spinUs = number(key, value, 0);
    else if (key === "--yield-us") opts.policy.yieldUs = number(key, value, 0);
    else if (key === "--timeout-s") opts.policy.timeoutS = number(key, value, 0.001);
    else if (key === "--parent-pid") opts.parentPid = number(key, value, 0);
    else if (key === "--combat") opts.combat = value;
  }
  parseCombat(opts.combat);
  if (!["socket", "http", "shm"].includes(opts.transport)) {
    throw new Error(`--transport ${opts.transport}; accepted: socket, http, shm`);
  }
  if (!Number.isInteger(opts.numEnvs)) throw new Error(`--num-envs ${opts.numEnvs}; expected an integer >= 1`);
  if (opts.numWorkers < 0) opts.numWorkers = opts.transport === "shm" ? 1 : 0;
  if (opts.transport === "shm" && opts.numWorkers < 1) {
    throw new Error("--transport shm needs env worker threads: --num-workers >= 1");
  }
  if (!(Number.isInteger(opts.numWorkers) && opts.numWorkers <= opts.numEnvs)) {
    throw new Error(`--num-workers ${opts.numWorkers}; expected an integer between 0 and --num-envs ${opts.numEnvs}`);
  }
  if (opts.transport !== "http" && !opts.address) throw new Error(`--transport ${opts.transport} needs --address PATH (a Unix socket)`);
  return opts;
}

/** OBSERVE's optional body: one byte, 1 = a record per seat (as STEP_MULTI), 0 = per env. */
function decodeObserve(body: Buffer): boolean {
  if (body.length === 0) return false;
  if (body.length === 1 && body[0] <= 1) return body[0] === 1;
  throw new ProtocolError(ErrorCode.MALFORMED, `OBSERVE body is ${body.length} bytes; accepted: empty, or one byte 0|1 (all seats)`);
}

function decodeActions(body: Buffer, count: number, what: string): Int32Array {
  if (body.length !== 4 * count) {
    throw new ProtocolError(ErrorCode.MALFORMED, `${what} body is ${body.length} bytes; expected ${4 * count} (${count} int32 actions)`);
  }
  const out = new Int32Array(count);
  for (let i = 0; i < count; i++) out[i] = body.readInt32LE(4 * i);
  return out;
}

class Server {
  readonly spaces: Spaces;
  readonly lay: Layout;
  envs: EnvBatch | null; // the envs in this thread (--num-workers 0), else null: they live in pool
  driver: object | null = null;
  badRequests = 0;
  clients = 0;
  name: string;

  constructor(public opts: Options, spec: GameSpec, readonly pool: WorkerPool | null, readonly segment: string | null) {
    this.spaces = spacesOf(spec, opts.numEnvs);
    this.lay = layout(this.spaces);
    this.envs = pool === null
      ? new EnvBatch(spec, opts.numEnvs, 0, makeRunner(opts.combat, spec.subSim, opts.policy.timeoutS * 1000)) : null;
    this.name = `meeple-node/${spec.name}`;
  }

  acquire(owner: object): void {
    if (this.driver === null) {
      this.pool?.driver.sync(); // a client that died mid-request left one in flight
      this.driver = owner;
    } else if (this.driver !== owner) {
      throw new ProtocolError(ErrorCode.BUSY,
        "another client drives these envs; one driver at a time (HELLO, SPACES and HEALTH are always answered)");
    }
  }

  release(owner: object): void {
    if (this.driver === owner) this.driver = null;
  }

  health() {
    const { steps, envErrors } = this.pool ? this.pool.health() : { steps: this.envs!.steps, envErrors: this.envs!.envErrors };
    return { steps, env_errors: envErrors, bad_requests: this.badRequests, num_workers: this.opts.numWorkers, clients: this.clients };
  }

  /** Records one request returns per env. */
  recordsPerEnv(command: MsgType, allSeats = false): number {
    return command === MsgType.STEP_MULTI || allSeats ? this.spaces.numSeats : 1;
  }

  /** Run an env command; the reply frame (header included) is written in one buffer. */
  execute(owner: object, command: MsgType, msgId: number, actions: Int32Array | null, seed: bigint | null, allSeats = false): Buffer {
    this.acquire(owner);
    const records = this.recordsPerEnv(command, allSeats);
    const envStride = records * this.lay.recordSize;
    const bodyLen = this.opts.numEnvs * envStride;
    const frame = Buffer.allocUnsafe(HEADER_SIZE + bodyLen);
    frame.writeUInt8(command, 0);
    frame.writeUInt32LE(msgId >>> 0, 1);
    frame.writeUInt32LE(bodyLen, 5);
    if (this.pool !== null) {
      this.pool.driver.request(command, actions, seed, allSeats);
      this.pool.driver.copyRecords(records, frame, HEADER_SIZE);
    } else {
      this.envs!.execute(command, actions, seed, { buf: frame, base: HEADER_SIZE, envStride }, allSeats);
    }
    return frame;
  }

  // -- socket transport --
  serveSocket(path: string): net.Server {
    const server = net.createServer((conn) => this.connection(conn));
    const old = process.umask(0o177);
    server.listen(path, () => process.umask(old));
    return server;
  }

  private connection(conn: net.Socket): void {
    const owner = {};
    let hello = false;
    let buf: Buffer = Buffer.alloc(0);
    let timer: NodeJS.Timeout | null = null;
    this.clients += 1;
    const reject = (msgId: number, err: ProtocolError) => {
      this.badRequests += 1;
      conn.end(encodeFrame(MsgType.ERROR, msgId, encodeError(err.code, err.message)));
      buf = Buffer.alloc(0);
    };
    conn.on("close", () => {
      this.clients -= 1;
      this.release(owner);
      if (timer) clearTimeout(timer);
    });
    conn.on("error", () => conn.destroy());
    conn.on("drain", () => conn.resume());
    conn.on("end", () => {
      if (buf.length > 0) {
        const what = buf.length < HEADER_SIZE ? `${buf.length} of ${HEADER_SIZE} bytes of the frame header`
          : `${buf.length - HEADER_SIZE} of ${buf.readUInt32LE(5)} body bytes`;
        reject(buf.length >= 5 ? buf.readUInt32LE(1) : 0, new ProtocolError(ErrorCode.MALFORMED, `truncated frame: connection closed after ${what}`));
      } else conn.end();
    });
    conn.on("data", (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      while (buf.length >= HEADER_SIZE) {
        const msgType = buf.readUInt8(0);
        const msgId = buf.readUInt32LE(1);
        const bodyLen = buf.readUInt32LE(5);
        if (bodyLen > this.opts.maxBody) {
          reject(msgId, new ProtocolError(ErrorCode.TOO_LARGE, `body_len ${bodyLen} exceeds the server maximum ${this.opts.maxBody}`));
          return;
        }
        if (buf.length < HEADER_SIZE + bodyLen) break;
        const body = buf.subarray(HEADER_SIZE, HEADER_SIZE + bodyLen);
        buf = buf.subarray(HEADER_SIZE + bodyLen);
        try {
          const reply = this.dispatch(owner, msgType, msgId, body, hello);
          if (msgType === MsgType.HELLO) hello = true;
          if (!conn.write(reply)) conn.pause(); // backpressure: read no more until the reply drains
          if (msgType === MsgType.CLOSE) {
            conn.end();
            return;
          }
        } catch (e) {
          const err = e instanceof ProtocolError ? e : new ProtocolError(ErrorCode.INTERNAL, String(e));
          if (err.code !== ErrorCode.BUSY) this.badRequests += 1;
          conn.write(encodeFrame(MsgType.ERROR, msgId, encodeError(err.code, err.message)));
          if (err.code === ErrorCode.MALFORMED) {
            conn.end();
            return;
          }
        }
      }
      if (timer) clearTimeout(timer);
      timer = buf.length ? setTimeout(() => reject(0, new ProtocolError(ErrorCode.MALFORMED,
        `truncated frame: ${buf.length} bytes pending for ${this.opts.frameTimeoutMs} ms`)), this.opts.frameTimeoutMs) : null;
    });
  }

  private dispatch(owner: object, msgType: number, msgId: number, body: Buffer, hello: boolean): Buffer {
    const reply = (b: Buffer) => encodeFrame(msgType, msgId, b);
    if (msgType === MsgType.HELLO) {
      const version = decodeHelloRequest(body);
      if (version !== VERSION) {
        throw new ProtocolError(ErrorCode.VERSION, `client speaks protocol version ${version}; this server speaks ${VERSION}`);
      }
      return reply(encodeHelloReply(this.name));
    }
    if (!(msgType in MsgType) || msgType === MsgType.ERROR) {
      throw new ProtocolError(ErrorCode.UNKNOWN_TYPE, `msg_type ${msgType} is unknown; accepted: HELLO(1) .. SHM_ATTACH(9)`);
    }
    if (!hello) throw new ProtocolError(ErrorCode.NOT_READY, `${MsgType[msgType]} before HELLO; send HELLO first`);
    const n = this.opts.numEnvs;
    const seats = this.spaces.numSeats;
    switch (msgType) {
      case MsgType.SPACES: return reply(encodeSpaces(this.spaces));
      case MsgType.HEALTH: return reply(encodeHealth(this.health()));
      case MsgType.CLOSE: this.release(owner); return reply(Buffer.alloc(0));
      case MsgType.SHM_ATTACH:
        if (this.opts.transport !== "shm") {
          throw new ProtocolError(ErrorCode.NOT_READY,
            `this server runs transport=${this.opts.transport}, no shm segment for clients: start it with --transport shm`);
        }
        if (body.length) throw new ProtocolError(ErrorCode.MALFORMED, "SHM_ATTACH takes an empty body");
        this.acquire(owner); // the attached client drives the envs until its socket closes
        return reply(encodeName(this.segment as string));
      case MsgType.RESET: return this.execute(owner, msgType, msgId, null, decodeReset(body));
      case MsgType.STEP: return this.execute(owner, msgType, msgId, decodeActions(body, n, "STEP"), null);
      case MsgType.STEP_MULTI: return this.execute(owner, msgType, msgId, decodeActions(body, seats * n, "STEP_MULTI"), null);
      default: return this.execute(owner, msgType, msgId, null, null, decodeObserve(body));
    }
  }

  // -- HTTP transport --
  serveHttp(port: number, ready: (port: number) => void): http.Server {
    const routes: { [key: string]: MsgType } = {
      "GET /hello": MsgType.HELLO, "GET /spaces": MsgType.SPACES, "POST /reset": MsgType.RESET, "POST /step": MsgType.STEP,
      "POST /step_multi": MsgType.STEP_MULTI, "GET /observe": MsgType.OBSERVE, "GET /health": MsgType.HEALTH, "POST /close": MsgType.CLOSE,
    };
    const server = http.createServer((req, res) => {
      const socket = req.socket as net.Socket & { owner?: object };
      socket.owner ??= {};
      const owner = socket.owner;
      const chunks: Buffer[] = [];
      let size = 0;
      req.on("data", (c: Buffer) => { size += c.length; if (size <= this.opts.maxBody) chunks.push(c); });
      req.on("end", () => {
        const send = (status: number, obj: object) => {
          const body = Buffer.from(JSON.stringify(obj));
          res.writeHead(status, { "Content-Type": "application/json", "Content-Length": body.length });
          res.end(body);
        };
        try {
          if (size > this.opts.maxBody) throw new ProtocolError(ErrorCode.TOO_LARGE, `body of ${size} bytes exceeds the server maximum ${this.opts.maxBody}`);
          const route = routes[`${req.method} ${(req.url ?? "").split("?")[0]}`];
          if (route === undefined) throw new ProtocolError(ErrorCode.UNKNOWN_TYPE, `${req.method} ${req.url} is not an endpoint`);
          let data: { [k: string]: unknown } = {};
          if (req.method === "POST" && size) {
            try { data = JSON.parse(Buffer.concat(chunks).toString("utf8")); } catch (e) {
              throw new ProtocolError(ErrorCode.MALFORMED, `request body is not JSON: ${e}`);
            }
          }
          if (/(^|&)all_seats=1(&|$)/.test((req.url ?? "").split("?")[1] ?? "")) data.all_seats = true;
          send(200, this.httpRoute(owner, route, data));
        } catch (e) {
          const err = e instanceof ProtocolError ? e : new ProtocolError(ErrorCode.INTERNAL, String(e));
          this.badRequests += 1;
          const status = { [ErrorCode.BUSY]: 409, [ErrorCode.ENV_EXCEPTION]: 500, [ErrorCode.INTERNAL]: 500, [ErrorCode.TOO_LARGE]: 413 }[err.code as number] ?? 400;
          send(status, { error: { code: err.code, name: ErrorCode[err.code].toLowerCase(), message: err.message } });
        }
      });
    });
    server.on("connection", (socket: net.Socket & { owner?: object }) => {
      socket.setNoDelay(true);
      this.clients += 1;
      socket.on("close", () => { this.clients -= 1; if (socket.owner) this.release(socket.owner); });
    });
    server.listen(port, "127.0.0.1", () => ready((server.address() as net.AddressInfo).port));
    return server;
  }

  /** An env command's records as the HTTP transport's JSON result. */
  private records(owner: object, command: MsgType, actions: Int32Array | null, seed: bigint | null, allSeats = false): object {
    const frame = this.execute(owner, command, 0, actions, seed, allSeats);
    const s = this.spaces;
    return recordsJson(s, readRecords(s, frame.subarray(HEADER_SIZE), s.numEnvs * this.recordsPerEnv(command, allSeats)));
  }

  private httpRoute(owner: object, route: MsgType, data: { [k: string]: unknown }): object {
    const s = this.spaces;
    switch (route) {
      case MsgType.HELLO: return { version: VERSION, server: this.name };
      case MsgType.SPACES: return spacesJson(s);
      case MsgType.HEALTH: return this.health();
      case MsgType.CLOSE: this.release(owner); return {};
      case MsgType.RESET: {
        const seed = data.seed ?? null;
        if (seed !== null && !(Number.isSafeInteger(seed) && (seed as number) >= 0)) {
          throw new ProtocolError(ErrorCode.MALFORMED, "'seed' must be a non-negative integer or null");
        }
        return this.records(owner, route, null, seed === null ? null : BigInt(seed as number));
      }
      case MsgType.STEP:
      case MsgType.STEP_MULTI: {
        const actions = data.actions;
        if (!Array.isArray(actions)) throw new ProtocolError(ErrorCode.MALFORMED, "body needs 'actions': a list of integers");
        const flat = (actions as unknown[]).flat() as number[];
        const expected = route === MsgType.STEP_MULTI ? s.numEnvs * s.numSeats : s.numEnvs;
        if (!flat.every((a) => Number.isInteger(a) && a >= -(2 ** 31) && a < 2 ** 31)) {
          throw new ProtocolError(ErrorCode.MALFORMED, "actions must be integers in int32 range");
        }
        if (flat.length !== expected) {
          throw new ProtocolError(ErrorCode.MALFORMED, `${MsgType[route]} carries ${flat.length} actions; expected ${expected}`);
        }
        return this.records(owner, route, Int32Array.from(flat), null);
      }
      default: return this.records(owner, route, null, null, data.all_seats === true);
    }
  }
}

function removeStaleSocket(path: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (!fs.existsSync(path)) return resolve();
    const probe = net.connect(path);
    probe.on("connect", () => { probe.destroy(); reject(new Error(`a server is already listening on ${path}`)); });
    probe.on("error", () => { fs.rmSync(path, { force: true }); resolve(); });
  });
}

async function main(): Promise<void> {
  let opts: Options;
  let spec: GameSpec;
  try {
    opts = parseArgs(process.argv.slice(2));
    spec = resolveGame(opts.game);
    makeRunner(opts.combat, spec.subSim, 0); // a game without sub-simulations refuses batched:PATH
  } catch (e) {
    console.error(`meeple-node: error: ${(e as Error).message}`);
    process.exit(2);
  }
  // crash leftovers of other servers, wherever they listened; then this address's own
  const segments = sweepStaleSegments();
  const sockets = await sweepStaleSockets();
  if (segments.length + sockets.length) {
    console.error(`meeple-node: removed stale segments/socket files of dead servers: ${[...segments, ...sockets].join(", ")}`);
  }
  const segment = opts.numWorkers === 0 ? null
    : segmentName(opts.transport === "http" ? `http:${process.pid}:${opts.address}` : opts.address);
  let pool: WorkerPool | null = null;
  try {
    if (segment !== null) claimSegment(segment);
    if (opts.transport !== "http") await removeStaleSocket(opts.address);
    if (segment !== null) pool = await WorkerPool.start(spec, opts.game, opts.numEnvs, opts.numWorkers, segment, opts.policy, opts.combat);
  } catch (e) {
    console.error(`meeple-node: error: ${(e as Error).message}`);
    process.exit(2);
  }
  const server = new Server(opts, spec, pool, segment);
  let listener: net.Server | http.Server;
  let address = opts.address;
  const ready = (at: string) => {
    address = at;
    console.log("MEEPLE_SERVER_READY " + JSON.stringify({
      transport: opts.transport, address: at, num_envs: opts.numEnvs, num_workers: opts.numWorkers, pid: process.pid,
      segment: opts.transport === "shm" ? segment : null, game: spec.name, combat: opts.combat,
    }));
  };
  if (opts.transport !== "http") {
    listener = server.serveSocket(opts.address);
    listener.on("listening", () => ready(opts.address));
  } else {
    const [, port] = (opts.address || "127.0.0.1:0").split(":");
    listener = server.serveHttp(Number(port), (p) => ready(`127.0.0.1:${p}`));
  }
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    listener.close();
    if (opts.transport !== "http") fs.rmSync(opts.address, { force: true });
    await pool?.close(); // the workers stop, the segment is removed
    process.exit(code);
  };
  pool?.watch((what) => {
    console.error(`meeple-node: error: ${what}; the env server at ${address} shut down (that worker's envs and their episodes are lost): restart the server`);
    void stop(1);
  });
  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));
  if (opts.parentPid) {
    setInterval(() => { if (process.ppid !== opts.parentPid) void stop(0); }, 500).unref();
  }
}

void main();
