// Wire format of docs/protocol.md (version 1), the TypeScript twin of meeple.transport.protocol.
// Everything is little-endian. Step-result records have a layout derived from SPACES alone.

export const VERSION = 1;
export const MAGIC = 0x5045454d; // "MEEP"
export const HEADER_SIZE = 9;

export enum MsgType {
  HELLO = 1, SPACES = 2, RESET = 3, STEP = 4, STEP_MULTI = 5, OBSERVE = 6, HEALTH = 7, CLOSE = 8,
  SHM_ATTACH = 9, ERROR = 255,
}

export enum ErrorCode {
  MALFORMED = 1, UNKNOWN_TYPE = 2, VERSION = 3, TOO_LARGE = 4, BAD_ACTION = 5, ENV_EXCEPTION = 6,
  BUSY = 7, NOT_READY = 8, INTERNAL = 9,
}

export class ProtocolError extends Error {
  constructor(public code: ErrorCode, message: string) {
    super(message);
  }
}

// dtype code -> [name, size]
export const DTYPES: Array<[string, number]> = [
  ["uint8", 1], ["int8", 1], ["uint16", 2], ["int16", 2], ["uint32", 4], ["int32", 4], ["float32", 4],
  ["float64", 8], ["int64", 8], ["uint64", 8],
];

export function dtypeCode(name: string): number {
  const code = DTYPES.findIndex(([n]) => n === name);
  if (code < 0) throw new ProtocolError(ErrorCode.MALFORMED, `dtype ${name} has no protocol code`);
  return code;
}

export const roundUp = (n: number, m: number): number => Math.ceil(n / m) * m;

export function encodeFrame(msgType: number, msgId: number, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(HEADER_SIZE);
  head.writeUInt8(msgType, 0);
  head.writeUInt32LE(msgId >>> 0, 1);
  head.writeUInt32LE(body.length, 5);
  return Buffer.concat([head, body]);
}

export interface Frame { msgType: number; msgId: number; body: Buffer }

export function decodeFrame(data: Buffer): Frame {
  if (data.length < HEADER_SIZE) {
    throw new ProtocolError(ErrorCode.MALFORMED, `truncated frame header: ${data.length} of ${HEADER_SIZE} bytes`);
  }
  const bodyLen = data.readUInt32LE(5);
  if (data.length !== HEADER_SIZE + bodyLen) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      `frame is ${data.length} bytes but its header announces ${HEADER_SIZE + bodyLen}`);
  }
  return { msgType: data.readUInt8(0), msgId: data.readUInt32LE(1), body: data.subarray(HEADER_SIZE) };
}

// -- bodies --

export function encodeHelloRequest(version = VERSION): Buffer {
  const b = Buffer.alloc(6);
  b.writeUInt32LE(MAGIC, 0);
  b.writeUInt16LE(version, 4);
  return b;
}

export function decodeHelloRequest(body: Buffer): number {
  expectLen(body, 6, "HELLO");
  const magic = body.readUInt32LE(0);
  if (magic !== MAGIC) {
    throw new ProtocolError(ErrorCode.MALFORMED, `HELLO magic 0x${magic.toString(16)}; expected 0x5045454d ('MEEP')`);
  }
  return body.readUInt16LE(4);
}

export function encodeName(name: string): Buffer {
  const raw = Buffer.from(name, "utf8");
  const b = Buffer.alloc(2);
  b.writeUInt16LE(raw.length, 0);
  return Buffer.concat([b, raw]);
}

export function decodeName(body: Buffer, at = 0): string {
  const n = body.readUInt16LE(at);
  return body.subarray(at + 2, at + 2 + n).toString("utf8");
}

export function encodeHelloReply(server: string, version = VERSION): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(version, 0);
  return Buffer.concat([b, encodeName(server)]);
}

export function decodeHelloReply(body: Buffer): { version: number; server: string } {
  return { version: body.readUInt16LE(0), server: decodeName(body, 2) };
}

export function encodeReset(seed: bigint | null): Buffer {
  const b = Buffer.alloc(9);
  b.writeUInt8(seed === null ? 0 : 1, 0);
  b.writeBigUInt64LE(seed === null ? 0n : BigInt.asUintN(64, seed), 1);
  return b;
}

export function decodeReset(body: Buffer): bigint | null {
  expectLen(body, 9, "RESET");
  return body.readUInt8(0) ? body.readBigUInt64LE(1) : null;
}

export function encodeActions(actions: number[]): Buffer {
  const b = Buffer.alloc(4 * actions.length);
  actions.forEach((a, i) => b.writeInt32LE(a, 4 * i));
  return b;
}

export function decodeActions(body: Buffer, count: number, what: string): number[] {
  expectLen(body, 4 * count, what, `${count} int32 actions`);
  return Array.from({ length: count }, (_, i) => body.readInt32LE(4 * i));
}

export function encodeError(code: number, text: string): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(code, 0);
  return Buffer.concat([b, Buffer.from(text, "utf8")]);
}

export function decodeError(body: Buffer): { code: number; text: string } {
  return { code: body.readUInt16LE(0), text: body.subarray(2).toString("utf8") };
}

export const HEALTH_FIELDS = ["steps", "env_errors", "bad_requests", "num_workers", "clients"] as const;
export type Health = { [K in (typeof HEALTH_FIELDS)[number]]: number };

export function encodeHealth(h: Health): Buffer {
  const b = Buffer.alloc(24);
  b.writeBigUInt64LE(BigInt(h.steps), 0);
  b.writeUInt32LE(h.env_errors, 8);
  b.writeUInt32LE(h.bad_requests, 12);
  b.writeUInt32LE(h.num_workers, 16);
  b.writeUInt32LE(h.clients, 20);
  return b;
}

export function decodeHealth(body: Buffer): Health {
  expectLen(body, 24, "HEALTH reply");
  return {
    steps: Number(body.readBigUInt64LE(0)), env_errors: body.readUInt32LE(8), bad_requests: body.readUInt32LE(12),
    num_workers: body.readUInt32LE(16), clients: body.readUInt32LE(20),
  };
}

function expectLen(body: Buffer, n: number, what: string, accepted = ""): void {
  if (body.length !== n) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      `${what} body is ${body.length} bytes; expected ${n}${accepted ? ` (${accepted})` : ""}`);
  }
}

// -- spaces and records --

export interface Spaces {
  numEnvs: number;
  numSeats: number;
  numActions: number;
  obsDtype: string;
  obsShape: number[];
  info: Array<[string, string]>;
  envName: string;
}

export function encodeSpaces(s: Spaces): Buffer {
  const head = Buffer.alloc(12 + 4 * s.obsShape.length + 2);
  head.writeUInt32LE(s.numEnvs, 0);
  head.writeUInt16LE(s.numSeats, 4);
  head.writeUInt32LE(s.numActions, 6);
  head.writeUInt8(dtypeCode(s.obsDtype), 10);
  head.writeUInt8(s.obsShape.length, 11);
  s.obsShape.forEach((d, i) => head.writeUInt32LE(d, 12 + 4 * i));
  head.writeUInt16LE(s.info.length, 12 + 4 * s.obsShape.length);
  const parts: Buffer[] = [head];
  for (const [name, dtype] of s.info) {
    const f = Buffer.alloc(2);
    f.writeUInt8(dtypeCode(dtype), 0);
    f.writeUInt8(name.length, 1);
    parts.push(f, Buffer.from(name, "ascii"));
  }
  parts.push(encodeName(s.envName));
  return Buffer.concat(parts);
}

export function decodeSpaces(body: Buffer): Spaces {
  try {
    const ndim = body.readUInt8(11);
    const obsShape = Array.from({ length: ndim }, (_, i) => body.readUInt32LE(12 + 4 * i));
    let pos = 12 + 4 * ndim;
    const nInfo = body.readUInt16LE(pos);
    pos += 2;
    const info: Array<[string, string]> = [];
    for (let i = 0; i < nInfo; i++) {
      const code = body.readUInt8(pos);
      const n = body.readUInt8(pos + 1);
      info.push([body.subarray(pos + 2, pos + 2 + n).toString("ascii"), DTYPES[code][0]]);
      pos += 2 + n;
    }
    return {
      numEnvs: body.readUInt32LE(0), numSeats: body.readUInt16LE(4), numActions: body.readUInt32LE(6),
      obsDtype: DTYPES[body.readUInt8(10)][0], obsShape, info, envName: decodeName(body, pos),
    };
  } catch (err) {
    throw new ProtocolError(ErrorCode.MALFORMED, `truncated SPACES block (${err})`);
  }
}

export interface Layout {
  info: Array<{ name: string; dtype: string; offset: number }>;
  obsOffset: number;
  obsCount: number;
  obsItem: number;
  maskOffset: number;
  recordSize: number;
}

export function layout(s: Spaces): Layout {
  let pos = 8;
  const info = s.info.map(([name, dtype]) => {
    const size = DTYPES[dtypeCode(dtype)][1];
    pos = roundUp(pos, size);
    const field = { name, dtype, offset: pos };
    pos += size;
    return field;
  });
  const obsOffset = roundUp(pos, 8);
  const obsItem = DTYPES[dtypeCode(s.obsDtype)][1];
  const obsCount = s.obsShape.reduce((a, b) => a * b, 1);
  const maskOffset = obsOffset + obsCount * obsItem;
  return { info, obsOffset, obsCount, obsItem, maskOffset, recordSize: roundUp(maskOffset + s.numActions, 8) };
}

export interface StepRecord {
  reward: number;
  done: number;
  truncated: number;
  info: { [name: string]: number };
  obs: number[];
  mask: number[];
}

export function writeScalar(b: Buffer, dtype: string, at: number, v: number): void {
  switch (dtype) {
    case "uint8": b.writeUInt8(v, at); break;
    case "int8": b.writeInt8(v, at); break;
    case "uint16": b.writeUInt16LE(v, at); break;
    case "int16": b.writeInt16LE(v, at); break;
    case "uint32": b.writeUInt32LE(v, at); break;
    case "int32": b.writeInt32LE(v, at); break;
    case "float32": b.writeFloatLE(v, at); break;
    case "float64": b.writeDoubleLE(v, at); break;
    case "int64": b.writeBigInt64LE(BigInt(v), at); break;
    case "uint64": b.writeBigUInt64LE(BigInt(v), at); break;
    default: throw new Error(`unknown dtype ${dtype}`);
  }
}

function readScalar(b: Buffer, dtype: string, at: number): number {
  switch (dtype) {
    case "uint8": return b.readUInt8(at);
    case "int8": return b.readInt8(at);
    case "uint16": return b.readUInt16LE(at);
    case "int16": return b.readInt16LE(at);
    case "uint32": return b.readUInt32LE(at);
    case "int32": return b.readInt32LE(at);
    case "float32": return b.readFloatLE(at);
    case "float64": return b.readDoubleLE(at);
    case "int64": return Number(b.readBigInt64LE(at));
    case "uint64": return Number(b.readBigUInt64LE(at));
    default: throw new Error(`unknown dtype ${dtype}`);
  }
}

/** Write ``rec`` as record ``index`` of ``out`` (zero-filled, so padding stays zero). */
export function writeRecord(s: Spaces, lay: Layout, out: Buffer, index: number, rec: StepRecord): void {
  const base = index * lay.recordSize;
  out.writeFloatLE(rec.reward, base);
  out.writeUInt8(rec.done, base + 4);
  out.writeUInt8(rec.truncated, base + 5);
  for (const f of lay.info) writeScalar(out, f.dtype, base + f.offset, rec.info[f.name] ?? 0);
  for (let i = 0; i < lay.obsCount; i++) writeScalar(out, s.obsDtype, base + lay.obsOffset + i * lay.obsItem, rec.obs[i]);
  for (let a = 0; a < s.numActions; a++) out.writeUInt8(rec.mask[a], base + lay.maskOffset + a);
}

export function readRecords(s: Spaces, body: Buffer, count: number): StepRecord[] {
  const lay = layout(s);
  if (body.length !== count * lay.recordSize) {
    throw new ProtocolError(ErrorCode.MALFORMED,
      `result body is ${body.length} bytes; expected ${count} records of ${lay.recordSize}`);
  }
  return Array.from({ length: count }, (_, r) => {
    const base = r * lay.recordSize;
    const info: { [name: string]: number } = {};
    for (const f of lay.info) info[f.name] = readScalar(body, f.dtype, base + f.offset);
    return {
      reward: body.readFloatLE(base), done: body.readUInt8(base + 4), truncated: body.readUInt8(base + 5), info,
      obs: Array.from({ length: lay.obsCount }, (_, i) => readScalar(body, s.obsDtype, base + lay.obsOffset + i * lay.obsItem)),
      mask: Array.from({ length: s.numActions }, (_, a) => body.readUInt8(base + lay.maskOffset + a)),
    };
  });
}

export function spacesJson(s: Spaces): object {
  return {
    num_envs: s.numEnvs, num_seats: s.numSeats, num_actions: s.numActions, obs_dtype: s.obsDtype,
    obs_shape: s.obsShape, info: s.info, env: s.envName,
  };
}

export function recordsJson(s: Spaces, recs: StepRecord[]): object {
  const info: { [name: string]: number[] } = {};
  for (const [name] of s.info) info[name] = recs.map((r) => r.info[name]);
  const [planes, rows, cols] = s.obsShape;
  const shaped = (obs: number[]) => s.obsShape.length === 3
    ? Array.from({ length: planes }, (_, p) => Array.from({ length: rows }, (_, r) => obs.slice((p * rows + r) * cols, (p * rows + r + 1) * cols)))
    : obs;
  return {
    obs: recs.map((r) => shaped(r.obs)), mask: recs.map((r) => r.mask), reward: recs.map((r) => r.reward),
    done: recs.map((r) => r.done), truncated: recs.map((r) => r.truncated), info,
  };
}
