// Reference env server in TypeScript: Connect Four over the socket (binary frames on a Unix
// socket, created 0600) and HTTP (JSON on 127.0.0.1) transports of docs/protocol.md.
// Node has no portable POSIX shared memory without native addons, so no shm transport here.
//
//   node dist/server.js --transport socket|http --address PATH|127.0.0.1:PORT --num-envs N

import * as fs from "fs";
import * as http from "http";
import * as net from "net";
import { Connect4Host } from "./host";
import {
  decodeActions, decodeHelloRequest, decodeReset, encodeError, encodeFrame, encodeHealth, encodeHelloReply,
  encodeSpaces, ErrorCode, HEADER_SIZE, layout, MsgType, ProtocolError, StepRecord, recordsJson, spacesJson, VERSION,
  writeRecord,
} from "./protocol";

interface Options { transport: string; address: string; numEnvs: number; maxBody: number; frameTimeoutMs: number; parentPid: number }

function parseArgs(argv: string[]): Options {
  const opts: Options = { transport: "socket", address: "", numEnvs: 8, maxBody: 64 * 1024 * 1024, frameTimeoutMs: 5000, parentPid: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${key} needs a value`);
    if (key === "--transport") opts.transport = value;
    else if (key === "--address") opts.address = value;
    else if (key === "--num-envs") opts.numEnvs = Number(value);
    else if (key === "--max-body") opts.maxBody = Number(value);
    else if (key === "--frame-timeout-ms") opts.frameTimeoutMs = Number(value);
    else if (key === "--parent-pid") opts.parentPid = Number(value);
    else throw new Error(`unknown option ${key}; accepted: --transport --address --num-envs --max-body --frame-timeout-ms --parent-pid`);
  }
  if (!["socket", "http"].includes(opts.transport)) {
    throw new Error(`--transport ${opts.transport}; accepted: socket, http (no shm in Node without native addons)`);
  }
  if (!(opts.numEnvs >= 1)) throw new Error(`--num-envs ${opts.numEnvs}; expected an integer >= 1`);
  return opts;
}

class Server {
  host: Connect4Host;
  lay;
  driver: object | null = null;
  badRequests = 0;
  clients = 0;
  name = "meeple-node/connect4";

  constructor(public opts: Options) {
    this.host = new Connect4Host(opts.numEnvs);
    this.lay = layout(this.host.spaces);
  }

  acquire(owner: object): void {
    if (this.driver === null) this.driver = owner;
    else if (this.driver !== owner) {
      throw new ProtocolError(ErrorCode.BUSY, "another client drives these envs; one driver at a time");
    }
  }

  release(owner: object): void {
    if (this.driver === owner) this.driver = null;
  }

  health() {
    return { steps: this.host.steps, env_errors: this.host.envErrors, bad_requests: this.badRequests, num_workers: 0, clients: this.clients };
  }

  execute(owner: object, command: MsgType, actions: number[] | null, seed: bigint | null): StepRecord[] {
    this.acquire(owner);
    const n = this.opts.numEnvs;
    if (actions !== null) {
      const expected = command === MsgType.STEP_MULTI ? 2 * n : n;
      if (actions.length !== expected) {
        throw new ProtocolError(ErrorCode.MALFORMED, `${MsgType[command]} carries ${actions.length} actions; expected ${expected}`);
      }
    }
    void seed;
    if (command === MsgType.RESET) return this.host.reset();
    if (command === MsgType.STEP) return this.host.step(actions as number[]);
    if (command === MsgType.STEP_MULTI) return this.host.stepMulti(actions as number[]);
    return this.host.observe();
  }

  packRecords(recs: StepRecord[]): Buffer {
    const out = Buffer.alloc(recs.length * this.lay.recordSize);
    recs.forEach((r, i) => writeRecord(this.host.spaces, this.lay, out, i, r));
    return out;
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
          const reply = this.dispatch(owner, msgType, body, hello);
          if (msgType === MsgType.HELLO) hello = true;
          conn.write(encodeFrame(msgType, msgId, reply));
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

  private dispatch(owner: object, msgType: number, body: Buffer, hello: boolean): Buffer {
    if (msgType === MsgType.HELLO) {
      const version = decodeHelloRequest(body);
      if (version !== VERSION) {
        throw new ProtocolError(ErrorCode.VERSION, `client speaks protocol version ${version}; this server speaks ${VERSION}`);
      }
      return encodeHelloReply(this.name);
    }
    if (!(msgType in MsgType) || msgType === MsgType.ERROR) {
      throw new ProtocolError(ErrorCode.UNKNOWN_TYPE, `msg_type ${msgType} is unknown; accepted: HELLO(1) .. SHM_ATTACH(9)`);
    }
    if (!hello) throw new ProtocolError(ErrorCode.NOT_READY, `${MsgType[msgType]} before HELLO; send HELLO first`);
    const n = this.opts.numEnvs;
    switch (msgType) {
      case MsgType.SPACES: return encodeSpaces(this.host.spaces);
      case MsgType.HEALTH: return encodeHealth(this.health());
      case MsgType.CLOSE: this.release(owner); return Buffer.alloc(0);
      case MsgType.SHM_ATTACH:
        throw new ProtocolError(ErrorCode.NOT_READY, "this server runs transport=socket; the Node server has no shm");
      case MsgType.RESET: return this.packRecords(this.execute(owner, msgType, null, decodeReset(body)));
      case MsgType.STEP: return this.packRecords(this.execute(owner, msgType, decodeActions(body, n, "STEP"), null));
      case MsgType.STEP_MULTI:
        return this.packRecords(this.execute(owner, msgType, decodeActions(body, 2 * n, "STEP_MULTI"), null));
      default:
        if (body.length) throw new ProtocolError(ErrorCode.MALFORMED, `${MsgType[msgType]} takes an empty body`);
        return this.packRecords(this.execute(owner, msgType, null, null));
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

  private httpRoute(owner: object, route: MsgType, data: { [k: string]: unknown }): object {
    const s = this.host.spaces;
    switch (route) {
      case MsgType.HELLO: return { version: VERSION, server: this.name };
      case MsgType.SPACES: return spacesJson(s);
      case MsgType.HEALTH: return this.health();
      case MsgType.CLOSE: this.release(owner); return {};
      case MsgType.RESET: return recordsJson(s, this.execute(owner, route, null, null));
      case MsgType.STEP:
      case MsgType.STEP_MULTI: {
        const actions = data.actions;
        if (!Array.isArray(actions)) throw new ProtocolError(ErrorCode.MALFORMED, "body needs 'actions': a list of integers");
        const flat = (actions as unknown[]).flat() as number[];
        if (!flat.every((a) => Number.isInteger(a))) throw new ProtocolError(ErrorCode.MALFORMED, "actions must be integers");
        return recordsJson(s, this.execute(owner, route, flat, null));
      }
      default: return recordsJson(s, this.execute(owner, route, null, null));
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
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error(`meeple-node: error: ${(e as Error).message}`);
    process.exit(2);
  }
  const server = new Server(opts);
  let listener: net.Server | http.Server;
  const ready = (address: string) => {
    console.log("MEEPLE_SERVER_READY " + JSON.stringify({ transport: opts.transport, address, num_envs: opts.numEnvs, pid: process.pid, segment: null }));
  };
  if (opts.transport === "socket") {
    await removeStaleSocket(opts.address);
    listener = server.serveSocket(opts.address);
    listener.on("listening", () => ready(opts.address));
  } else {
    const [, port] = (opts.address || "127.0.0.1:0").split(":");
    listener = server.serveHttp(Number(port), (p) => ready(`127.0.0.1:${p}`));
  }
  const shutdown = () => {
    listener.close();
    if (opts.transport === "socket") fs.rmSync(opts.address, { force: true });
    process.exit(0);
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
  if (opts.parentPid) {
    setInterval(() => { if (process.ppid !== opts.parentPid) shutdown(); }, 500).unref();
  }
}

void main();
