// ONNX Runtime's side of `tinyfin-bench --onnx` (tools/bench_onnx.cpp): runs one model with the
// onnxruntime-node package's CPU provider on the feeds tinyfin-bench wrote, and reports each
// run's time and the outputs, so that both are timed in the same run of the benchmark.
//
//   node bench_onnx_ort.js MANIFEST
//
// MANIFEST (written by tinyfin-bench) has one item per line:
//   model PATH | threads N | warmup N | repeat N | out DIR
//   feed NAME TYPE FILE DIM...     (TYPE: float32, int64, int32, bool; FILE: raw little-endian)
// Prints: "version V", one "time_ms WALL CPU" per timed run (CPU: the process's CPU time, all
// threads), then "output NAME TYPE FILE DIM..." per
// output (written to DIR). onnxruntime-node is found through NODE_PATH (npm install
// --ignore-scripts onnxruntime-node; docs/performance.md).
'use strict';
const fs = require('fs');
const path = require('path');

const ARRAYS = {
  float32: Float32Array, int64: BigInt64Array, int32: Int32Array, bool: Uint8Array, float16: Uint16Array,
};

function readManifest(file) {
  const m = {feeds: []};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const w = line.trim().split(/\s+/);
    if (w[0] === 'feed') {
      m.feeds.push({name: w[1], type: w[2], file: w[3], dims: w.slice(4).map(Number)});
    } else if (w[0]) {
      m[w[0]] = w.slice(1).join(' ');
    }
  }
  return m;
}

async function main() {
  const m = readManifest(process.argv[2]);
  let ort;
  try {
    ort = require('onnxruntime-node');
  } catch (e) {
    console.log('error onnxruntime-node not found (npm install --ignore-scripts onnxruntime-node; set NODE_PATH ' +
                'to its node_modules): ' + e.message.split('\n')[0]);
    process.exit(3);
  }
  const session = await ort.InferenceSession.create(m.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: Number(m.threads),
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const f of m.feeds) {
    const bytes = fs.readFileSync(f.file);
    const Type = ARRAYS[f.type];
    const data = new Type(bytes.buffer, bytes.byteOffset, bytes.byteLength / Type.BYTES_PER_ELEMENT);
    feeds[f.name] = new ort.Tensor(f.type, f.type === 'bool' ? Uint8Array.from(data) : data, f.dims);
  }
  let version = 'unknown';
  try {
    version = require('onnxruntime-node/package.json').version;
  } catch (e) { /* an older layout */ }
  console.log('version ' + version);
  let outputs = null;
  const warmup = Number(m.warmup), repeat = Number(m.repeat);
  for (let i = 0; i < warmup + repeat; ++i) {
    const cpu = process.cpuUsage();
    const start = process.hrtime.bigint();
    outputs = await session.run(feeds);
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    const used = process.cpuUsage(cpu);
    if (i >= warmup) console.log('time_ms ' + ms + ' ' + (used.user + used.system) / 1000);
  }
  for (const name of session.outputNames) {
    const t = outputs[name];
    const file = path.join(m.out, 'ort_' + name.replace(/[^A-Za-z0-9_.-]/g, '_') + '.bin');
    fs.writeFileSync(file, Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    console.log(['output', name, t.type, file].concat(t.dims).join(' '));
  }
}

main().catch((e) => {
  console.log('error ' + String(e && e.message || e).split('\n')[0]);
  process.exit(4);
});
