// bench/real/workers.js — the workload of the real_node_16t row.
// Usage: node workers.js ROUNDS
// A Node.js service's pattern with worker threads: 16 workers (on a 2-core
// machine), each an isolate with its own JavaScript heap, build arrays of
// objects and strings, serialise part of them to JSON, and allocate Buffers
// (their backing stores come from the process malloc, not the JavaScript
// heap) of 1 KiB to 256 KiB; every round each worker transfers one
// ArrayBuffer to the main thread, which frees it there, so the allocator sees
// blocks allocated by one thread and freed by another. Prints a checksum and
// the number of objects built (the wrapper's ops).
'use strict';
const { Worker, isMainThread, parentPort, workerData } = require('worker_threads');
const WORKERS = 16;

if (isMainThread) {
  const rounds = +process.argv[2] || 8;
  let done = 0, check = 0, objects = 0, held = [];
  for (let w = 0; w < WORKERS; w++) {
    const worker = new Worker(__filename, { workerData: { seed: w, rounds } });
    worker.on('message', (m) => {
      if (m.buf) {
        held.push(m.buf);
        if (held.length > 8) held.shift();
        return;
      }
      check = (check + m.check) % 1000000007; // a sum: workers finish in any order
      objects += m.objects;
      if (++done === WORKERS) {
        console.log('check=' + check + ' held=' + held.length);
        console.log('objects=' + objects);
      }
    });
    worker.on('error', (e) => { console.error(e); process.exitCode = 1; });
  }
} else {
  const { seed, rounds } = workerData;
  let acc = 0, objects = 0;
  for (let r = 0; r < rounds; r++) {
    const a = [];
    for (let i = 0; i < 25000; i++) a.push({ i, s: 'v' + (i * 31 + seed), t: new Array(1 + ((i + r) & 7)).fill(i) });
    objects += a.length;
    acc += JSON.stringify(a.slice(0, 4000)).length;
    const bufs = [];
    for (let k = 0; k < 64; k++) {
      const b = Buffer.alloc(1024 << ((k + seed + r) % 9)); // 1 KiB .. 256 KiB
      b[0] = k;
      bufs.push(b);
    }
    acc += bufs.reduce((s, b) => s + b.length, 0) % 1000;
    const out = new ArrayBuffer(64 << 10);
    new Uint8Array(out)[0] = r;
    parentPort.postMessage({ buf: out }, [out]);
  }
  parentPort.postMessage({ check: acc % 1000000007, objects });
}
