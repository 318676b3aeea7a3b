#!/usr/bin/env node
// Builds the shared-memory addon (native/shm.cc -> build/meeple_shm.node) with the system C++
// compiler. Why not node-gyp: it fetches Node's full header tarball from the Node.js release
// site at build time (CI and developer machines here reach only package registries) and brings
// make and gyp for what is one g++ line. The addon uses Node-API alone, whose headers come from the
// npm package node-api-headers (a devDependency: `npm ci` installs it), falling back to the
// headers installed next to the node binary. Node-API symbols resolve against the running node
// at load time, so nothing is linked. Rebuilds only when the source or this script changed.
//
//   node scripts/build-native.js        (part of `npm run build`; CXX overrides g++)

"use strict";
const { execFileSync } = require("child_process");
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "..");
const source = path.join(root, "native", "shm.cc");
const out = path.join(root, "build", "meeple_shm.node");

function includeDir() {
  try {
    return require("node-api-headers").include_dir;
  } catch {
    const beside = path.resolve(path.dirname(process.execPath), "..", "include", "node");
    if (fs.existsSync(path.join(beside, "node_api.h"))) return beside;
    console.error("build-native: no Node-API headers: run `npm ci` (installs node-api-headers)");
    process.exit(1);
  }
}

const newest = Math.max(fs.statSync(source).mtimeMs, fs.statSync(__filename).mtimeMs);
if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= newest) process.exit(0);
fs.mkdirSync(path.dirname(out), { recursive: true });
const cxx = process.env.CXX || "g++";
const args = [
  "-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fPIC", "-shared",
  "-fvisibility=hidden", "-DNAPI_VERSION=8", `-I${includeDir()}`, source, "-o", `${out}.tmp`, "-lrt",
];
try {
  execFileSync(cxx, args, { stdio: "inherit" });
} catch (err) {
  console.error(`build-native: ${cxx} ${args.join(" ")} failed (a C++17 compiler is needed for --transport shm)`);
  process.exit(1);
}
fs.renameSync(`${out}.tmp`, out);
console.log(`build-native: ${path.relative(root, out)}`);
