// llama.cpp's side of `tinyfin-bench --llm FILE.gguf --compare llamacpp` (tools/tinyfin_bench.cpp):
// the same GGUF file through node-llama-cpp (llama.cpp's C++ behind a Node binding, prebuilt CPU
// backends chosen at run time by the CPU's features), a co-process that tinyfin-bench asks for one
// run between each of tinyfin's own, so that both see the same load.
//
//   node bench_llm_llamacpp.js --model FILE.gguf --threads N --prompt P --generate G
//
// Protocol, one JSON object a line on stdout (the rest of the output goes to stderr):
//   start-up: {"status": "ready", ...what was loaded} or {"peer": "llamacpp", "error": "..."}
//   stdin "run ID ID ...": a fresh sequence (KV cache cleared), the prompt of those token ids
//     evaluated, then G tokens decoded one at a time, greedy (argmax) throughout; answers
//     {"prompt_s": ..., "generate_s": ..., "generate_cpu_s": ...}
//     prompt_s: from handing the ids to llama.cpp to the first generated token in hand (the
//     prompt's llama_decode, logits of its last position, the greedy pick), as tinyfin times its
//     prefill and argmax; generate_s: the G tokens after it, each one llama_decode of the last
//     token and a greedy pick; generate_cpu_s: the process's CPU time (all threads) over those G.
//   stdin "done": {"peer": "llamacpp", medians of the runs after the first (a warm-up)}.
// node-llama-cpp (ESM only, so not found by require) is looked up in NODE_PATH's folders:
//   npm install --ignore-scripts --omit=optional --prefix DIR node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1
//   NODE_PATH=DIR/node_modules tinyfin-bench --llm FILE.gguf --compare llamacpp
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const {pathToFileURL} = require('url');

const INSTALL = 'npm install --ignore-scripts --omit=optional --prefix DIR node-llama-cpp@3.22.1 ' +
    '@node-llama-cpp/linux-x64@3.22.1, then NODE_PATH=DIR/node_modules';

function say(object) {
  process.stdout.write(JSON.stringify(object) + '\n');
}

function fail(message) {
  say({peer: 'llamacpp', error: message});
  process.exit(1);
}

function parseArgs(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (i + 1 >= argv.length) fail(`${argv[i]} needs a value`);
    a[key] = key === 'model' ? argv[i + 1] : Number(argv[i + 1]);
  }
  for (const k of ['model', 'threads', 'prompt', 'generate'])
    if (a[k] === undefined || (k !== 'model' && !(Number.isInteger(a[k]) && a[k] > 0)))
      fail(`--${k} missing or not a positive integer`);
  return a;
}

// node-llama-cpp's entry point in one of NODE_PATH's folders, or null.
function findPackage() {
  for (const dir of (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean)) {
    const root = path.join(dir, 'node-llama-cpp');
    let pkg;
    try {
      pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    } catch (e) {
      continue;
    }
    const dot = pkg.exports && pkg.exports['.'];
    const entry = (dot && (dot.import || dot.default || (typeof dot === 'string' ? dot : null))) || pkg.main;
    if (typeof entry === 'string') return {root, version: pkg.version, entry: path.join(root, entry)};
  }
  return null;
}

function median(v) {
  const s = [...v].sort((x, y) => x - y);
  const n = s.length;
  return n === 0 ? NaN : n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

function cpuSeconds() {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const pkg = findPackage();
  if (!pkg) fail(`node-llama-cpp not found in NODE_PATH (${process.env.NODE_PATH || 'unset'}): ${INSTALL}`);
  const nlc = await import(pathToFileURL(pkg.entry).href);
  const backendLines = [], repacked = {};
  let loadError = '';
  let llama;
  try {
    llama = await nlc.getLlama({
      gpu: false, build: 'never', maxThreads: 0, logLevel: nlc.LlamaLogLevel.debug,
      logger: (level, text) => {
        if (/load_backend|CPU backend/.test(text)) backendLines.push(text.trim());
        const r = text.match(/repack tensor \S+ with (\w+)/);  // the weights ggml repacks at load
        if (r) repacked[r[1]] = (repacked[r[1]] || 0) + 1;
        if (level === nlc.LlamaLogLevel.error) {
          process.stderr.write(`llama.cpp: ${text}\n`);
          if (/error loading model/.test(text)) loadError = text.trim();
        }
      },
    });
  } catch (e) {
    fail(`node-llama-cpp ${pkg.version} found no prebuilt llama.cpp for this machine (${e.message}): ${INSTALL}`);
  }
  const context = a.prompt + a.generate + 1;
  let model, ctx;
  try {
    model = await llama.loadModel({modelPath: a.model, gpuLayers: 0});
    ctx = await model.createContext({
      contextSize: context, batchSize: Math.min(a.prompt, 512), sequences: 1, threads: {ideal: a.threads, min: a.threads},
      // One sequence: its step dispatched at once, not on the next event-loop cycle.
      batching: {dispatchSchedule: dispatch => dispatch()},
    });
  } catch (e) {
    // A GGUF file without a vocabulary (tinyfin loads it, llama.cpp does not): say how to write one.
    const hint = /tokenizer/.test(loadError) ? ' (llama.cpp wants a vocabulary in the file: ' +
        'tools/tinyfin_llm_random_model.py --gguf writes one, tinyfin-quantize keeps it)' : '';
    fail(`llama.cpp cannot load ${a.model}: ${loadError || e.message}${hint}`);
  }
  const seq = ctx.getSequence();
  const variant = backendLines.map(l => (l.match(/libggml-cpu-([\w-]+)\.so/) || [])[1]).filter(Boolean);
  say({
    status: 'ready', node_llama_cpp: pkg.version, llama_cpp: llama.llamaCppRelease.release,
    cpu_backend: variant.length ? variant[variant.length - 1] : 'unknown', system_info: llama.systemInfo.trim(),
    threads: ctx.currentThreads, flash_attention: ctx.flashAttention,
    repacked: Object.entries(repacked).map(([k, n]) => `${n} ${k}`).join(', ') || 'none',
  });

  const runs = [];
  const lines = readline.createInterface({input: process.stdin});
  for await (const line of lines) {
    const words = line.trim().split(/\s+/);
    if (words[0] === 'done') break;
    if (words[0] !== 'run') fail(`unknown request '${line}'`);
    const ids = words.slice(1).map(Number);
    if (ids.length !== a.prompt) fail(`run wants ${a.prompt} token ids, got ${ids.length}`);
    await seq.clearHistory();
    // Let the other engine's threads settle (its pool may poll briefly after its last step).
    await new Promise(resolve => setTimeout(resolve, 50));
    const t0 = performance.now();
    const it = seq.evaluate(ids, {temperature: 0})[Symbol.asyncIterator]();
    let r = await it.next();
    const t1 = performance.now(), c1 = cpuSeconds();
    for (let i = 0; i < a.generate && !r.done; ++i) r = await it.next();
    const t2 = performance.now(), c2 = cpuSeconds();
    await it.return();
    if (r.done) fail('llama.cpp stopped before the tokens asked for');
    const run = {prompt_s: (t1 - t0) / 1e3, generate_s: (t2 - t1) / 1e3, generate_cpu_s: c2 - c1, last_token: r.value};
    runs.push(run);
    say(run);
  }
  const timed = runs.slice(1);
  say({
    peer: 'llamacpp', node_llama_cpp: pkg.version, llama_cpp: llama.llamaCppRelease.release,
    cpu_backend: variant.length ? variant[variant.length - 1] : 'unknown', threads: ctx.currentThreads, runs: timed.length,
    prompt_tokens_per_s: median(timed.map(r => a.prompt / r.prompt_s)),
    generate_tokens_per_s: median(timed.map(r => a.generate / r.generate_s)),
    generate_tokens_per_cpu_s: median(timed.map(r => a.generate / r.generate_cpu_s)),
  });
  await ctx.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch(e => fail(String(e && e.stack || e)));
