// Golden frames (tests/data/protocol/): `write <dir>` encodes frames.json into <dir>/ts/*.bin;
// `check <dir>` decodes <dir>/python/*.bin and <dir>/ts/*.bin, compares them with the manifest,
// re-encodes every frame and compares the bytes with both sets, and replays the Connect Four
// result's moves on this server's own game. Exit code 1 on any difference.

import * as fs from "fs";
import * as path from "path";
import { EnvBatch } from "./envbatch";
import { connect4 } from "./games/connect4";
import * as P from "./protocol";

type Frame = { [k: string]: any };

function toSpaces(j: Frame): P.Spaces {
  return {
    numEnvs: j.num_envs, numSeats: j.num_seats, numActions: j.num_actions, obsDtype: j.obs_dtype,
    obsShape: j.obs_shape, info: j.info, envName: j.env,
  };
}

function recordsFromJson(recs: Frame[]): P.StepRecord[] {
  return recs.map((r) => ({ reward: r.reward, done: r.done, truncated: r.truncated, info: r.info, obs: r.obs, mask: r.mask }));
}

function encodeBody(f: Frame): Buffer {
  switch (f.kind) {
    case "hello_request": return P.encodeHelloRequest(f.version);
    case "hello_reply": return P.encodeHelloReply(f.server, f.version);
    case "spaces": return P.encodeSpaces(toSpaces(f.spaces));
    case "reset": return P.encodeReset(f.seed === null ? null : BigInt(f.seed));
    case "actions": return P.encodeActions(f.actions);
    case "empty": return Buffer.alloc(0);
    case "records": {
      const s = toSpaces(f.spaces);
      const lay = P.layout(s);
      const out = Buffer.alloc(f.records.length * lay.recordSize);
      recordsFromJson(f.records).forEach((r, i) => P.writeRecord(s, lay, out, i, r));
      return out;
    }
    case "health": return P.encodeHealth(f.health);
    case "error": return P.encodeError(f.code, f.text);
    case "name": return P.encodeName(f.value);
    default: throw new Error(`unknown kind ${f.kind}`);
  }
}

function normRecords(recs: P.StepRecord[], s: P.Spaces): object[] {
  return recs.map((r) => ({
    reward: r.reward, done: r.done, truncated: r.truncated,
    info: Object.fromEntries(s.info.map(([n]) => [n, r.info[n]])), obs: r.obs, mask: r.mask,
  }));
}

function decodeBody(f: Frame, body: Buffer): unknown {
  switch (f.kind) {
    case "hello_request": return P.decodeHelloRequest(body);
    case "hello_reply": { const h = P.decodeHelloReply(body); return [h.version, h.server]; }
    case "spaces": return P.spacesJson(P.decodeSpaces(body));
    case "reset": { const s = P.decodeReset(body); return s === null ? null : Number(s); }
    case "actions": return P.decodeActions(body, f.actions.length, "golden");
    case "empty": return body.length;
    case "records": {
      const s = toSpaces(f.spaces);
      return normRecords(P.readRecords(s, body, f.records.length), s);
    }
    case "health": return P.decodeHealth(body);
    case "error": { const e = P.decodeError(body); return [e.code, e.text]; }
    case "name": return P.decodeName(body);
    default: throw new Error(`unknown kind ${f.kind}`);
  }
}

function expected(f: Frame): unknown {
  switch (f.kind) {
    case "hello_request": return f.version;
    case "hello_reply": return [f.version, f.server];
    case "spaces": return f.spaces;
    case "reset": return f.seed;
    case "actions": return f.actions;
    case "empty": return 0;
    case "records": return normRecords(recordsFromJson(f.records), toSpaces(f.spaces));
    case "health": return f.health;
    case "error": return [f.code, f.text];
    case "name": return f.value;
  }
}

function main(): number {
  const [command, dir] = process.argv.slice(2);
  if (!["write", "check"].includes(command) || !dir) {
    console.error("usage: node dist/golden.js write|check <tests/data/protocol>");
    return 2;
  }
  const frames: Frame[] = JSON.parse(fs.readFileSync(path.join(dir, "frames.json"), "utf8"));
  if (command === "write") {
    fs.mkdirSync(path.join(dir, "ts"), { recursive: true });
    for (const f of frames) fs.writeFileSync(path.join(dir, "ts", `${f.name}.bin`), P.encodeFrame(f.msg_type, f.msg_id, encodeBody(f)));
    return 0;
  }
  const problems: string[] = [];
  for (const f of frames) {
    const ours = P.encodeFrame(f.msg_type, f.msg_id, encodeBody(f));
    for (const who of ["python", "ts"]) {
      const data = fs.readFileSync(path.join(dir, who, `${f.name}.bin`));
      if (!ours.equals(data)) problems.push(`${who}/${f.name}.bin: TypeScript encodes different bytes`);
      const frame = P.decodeFrame(data);
      if (frame.msgType !== f.msg_type || frame.msgId !== f.msg_id) problems.push(`${who}/${f.name}.bin: header differs`);
      const got = JSON.stringify(decodeBody(f, frame.body));
      if (got !== JSON.stringify(expected(f))) problems.push(`${who}/${f.name}.bin: decodes to ${got.slice(0, 200)}`);
    }
    if (f.kind === "records" && f.moves) { // the same game on the TypeScript Connect Four
      const n = f.records.length;
      const envs = new EnvBatch(connect4, n);
      const body = Buffer.alloc(n * envs.lay.recordSize);
      const sink = { buf: body, base: 0, envStride: envs.lay.recordSize };
      envs.execute(P.MsgType.RESET, null, null, sink);
      for (const m of f.moves) envs.execute(P.MsgType.STEP, Int32Array.from(m), null, sink);
      const s = toSpaces(f.spaces);
      const recs = P.readRecords(s, body, n);
      if (JSON.stringify(normRecords(recs, s)) !== JSON.stringify(expected(f))) problems.push(`${f.name}: the TypeScript game differs`);
    }
  }
  for (const p of problems) console.error(p);
  console.log(`${frames.length} golden frames x 2 encoders checked, ${problems.length} problems`);
  return problems.length ? 1 : 0;
}

process.exit(main());
