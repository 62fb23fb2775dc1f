#!/usr/bin/env node
// ort_run.js: ONNX Runtime (npm onnxruntime-node, CPU) timed the way reprise-run times the
// engine, for the side-by-side table of docs/benchmarks.md.
//
//   node ort_run.js --ort-dir DIR --model M.onnx --input NAME=FILE.npy [--threads N]
//                   [--iterations N] [--warmup N] [--profile PREFIX]
//
// DIR is the npm prefix that onnxruntime-node was installed into. Session options: intra-op
// threads N, inter-op threads 1, sequential execution, graph optimisations "all". Prints one
// JSON line: load_us (session creation), first_run_us, then per-run median / min / p90 / max /
// mean over `iterations` runs after `warmup` unmeasured ones. Inputs: C-order .npy
// files of float32 / float64, int64 / int32 / int8, uint8 or bool (NPY_TYPES). --profile: ONNX
// Runtime's own profile of every run (a JSON array of events, one "Node" event per node and
// run, in microseconds) into PREFIX_<date>.json, named in the JSON line as "profile" (null if
// none was written); profiling adds its own cost to the times, so compare them only with
// profiled runs (reprise-run --profile).
'use strict';
const fs = require('fs');
const path = require('path');

function parseArgs(argv) {
  const o = {threads: 1, iterations: 10, warmup: 1, inputs: []};
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i], value = argv[i + 1];
    if (value === undefined) throw new Error(`flag ${flag} needs a value`);
    if (flag === '--ort-dir') o.ortDir = value;
    else if (flag === '--model') o.model = value;
    else if (flag === '--input') o.inputs.push(value);
    else if (flag === '--threads') o.threads = parseInt(value, 10);
    else if (flag === '--iterations') o.iterations = parseInt(value, 10);
    else if (flag === '--warmup') o.warmup = parseInt(value, 10);
    else if (flag === '--profile') o.profile = value;
    else throw new Error(`unknown flag ${flag}`);
  }
  if (!o.ortDir || !o.model || o.inputs.length === 0) {
    throw new Error('--ort-dir, --model and --input NAME=FILE.npy are required');
  }
  if (!(o.threads >= 1 && o.iterations >= 1 && o.iterations <= 100000 && o.warmup >= 0)) {
    throw new Error('--threads >= 1, 1 <= --iterations <= 100000, --warmup >= 0');
  }
  return o;
}

// .npy element types onnxruntime-node takes, by their little-endian descr: the ONNX type name
// and the typed array that holds it.
const NPY_TYPES = {
  '<f4': ['float32', Float32Array],
  '<f8': ['float64', Float64Array],
  '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array],
  '|u1': ['uint8', Uint8Array],
  '|i1': ['int8', Int8Array],
  '|b1': ['bool', Uint8Array],
};

// A C-order .npy file (format 1.0 to 3.0) of one of NPY_TYPES.
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = buf[6];
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const type = descr && NPY_TYPES[descr[1]];
  if (!type || /'fortran_order':\s*True/.test(header)) {
    throw new Error(`${file}: want a C-order array of ${Object.keys(NPY_TYPES).join(', ')}, ` +
                    `got ${header}`);
  }
  const m = /'shape':\s*\(([^)]*)\)/.exec(header);
  const shape = m[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const offset = start + headerLen;
  const bytes = buf.buffer.slice(buf.byteOffset + offset, buf.byteOffset + buf.length);
  const count = shape.reduce((a, b) => a * b, 1);
  if (bytes.byteLength < count * type[1].BYTES_PER_ELEMENT) {
    throw new Error(`${file}: ${bytes.byteLength} bytes of data for shape (${shape})`);
  }
  return {type: type[0], shape, data: new type[1](bytes, 0, count)};
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const ort = require(path.join(path.resolve(o.ortDir), 'node_modules', 'onnxruntime-node'));
  const feeds = {};
  for (const spec of o.inputs) {
    const at = spec.indexOf('=');
    const {type, shape, data} = readNpy(spec.slice(at + 1));
    feeds[spec.slice(0, at)] = new ort.Tensor(type, data, shape);
  }
  const now = () => Number(process.hrtime.bigint()) / 1e3;  // microseconds
  const loadStart = now();
  const session = await ort.InferenceSession.create(o.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: o.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    ...(o.profile ? {enableProfiling: true, profileFilePrefix: o.profile} : {}),
  });
  const loadUs = now() - loadStart;
  let t = now();
  await session.run(feeds);
  const firstRunUs = now() - t;
  for (let i = 0; i < o.warmup; ++i) await session.run(feeds);
  const us = [];
  for (let i = 0; i < o.iterations; ++i) {
    t = now();
    await session.run(feeds);
    us.push(now() - t);
  }
  let profile;
  if (o.profile) {
    // The binding returns no name: the newest PREFIX_*.json is this session's profile.
    if (session.endProfiling) session.endProfiling();
    const dir = path.dirname(path.resolve(o.profile)), base = path.basename(o.profile) + '_';
    const written = fs.readdirSync(dir)
                        .filter((f) => f.startsWith(base) && f.endsWith('.json'))
                        .map((f) => path.join(dir, f))
                        .sort((x, y) => fs.statSync(y).mtimeMs - fs.statSync(x).mtimeMs);
    profile = written.length > 0 ? written[0] : null;
  }
  us.sort((a, b) => a - b);
  const pick = (p) => us[Math.min(us.length - 1, Math.max(0, Math.ceil(p * us.length) - 1))];
  const mean = us.reduce((a, b) => a + b, 0) / us.length;
  const version = require(path.join(path.resolve(o.ortDir), 'node_modules', 'onnxruntime-node',
                                    'package.json')).version;
  console.log(JSON.stringify({
    runtime: 'onnxruntime-node', version, model: o.model, threads: o.threads,
    iterations: o.iterations, warmup: o.warmup, load_us: loadUs, first_run_us: firstRunUs,
    median_us: pick(0.5), min_us: us[0], p90_us: pick(0.9), max_us: us[us.length - 1],
    mean_us: mean, ...(profile !== undefined ? {profile} : {}),
  }));
}

main().catch((e) => {
  console.error(`ort_run: ${e.message}`);
  process.exit(1);
});
