// bench_ort.js — ONNX Runtime (CPU execution provider) on the same model files and with
// the same input and timing loop as `gpujobd bench onnx`. Used by bench_vs_onnxruntime.sh.
//   NODE_PATH=DIR/node_modules node bench_ort.js THREADS SECONDS BATCH MODEL.onnx [CHANNELS [SIZE]]
// (input BATCH x CHANNELS x SIZE x SIZE; default 3 x 224 x 224)
const ort = require('onnxruntime-node');

async function main() {
    const [threads, seconds, batch, path] = [parseInt(process.argv[2]), parseFloat(process.argv[3]),
        parseInt(process.argv[4]), process.argv[5]];
    const ch = parseInt(process.argv[6] || '3'), size = parseInt(process.argv[7] || '224');
    const t0 = process.hrtime.bigint();
    const sess = await ort.InferenceSession.create(path, {
        executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1,
        executionMode: 'sequential', graphOptimizationLevel: 'all' });
    const tCreate = Number(process.hrtime.bigint() - t0) / 1e6;
    const name = sess.inputNames[0];
    const n = batch * ch * size * size;
    const data = new Float32Array(n);
    let seed = 42;
    for (let k = 0; k < n; k++) {
        seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
        data[k] = (seed >>> 8) / 16777216 - 0.5;
    }
    const feeds = {};
    feeds[name] = new ort.Tensor('float32', data, [batch, ch, size, size]);
    for (let w = 0; w < 2; w++)
        await sess.run(feeds);
    const lat = [];
    const start = process.hrtime.bigint();
    const el = () => Number(process.hrtime.bigint() - start) / 1e9;
    while (lat.length < 4096 && (lat.length < 5 || el() < seconds)) {
        const a = process.hrtime.bigint();
        await sess.run(feeds);
        lat.push(Number(process.hrtime.bigint() - a) / 1e6);
    }
    const total = el();
    lat.sort((x, y) => x - y);
    const perS = lat.length * batch / total;   // 3 decimals below 10 (1024x1024 models)
    const base = path.split('/').pop();
    console.log(`${base.padEnd(24)} batch ${String(batch).padStart(2)} threads ${threads}: ` +
        `${perS.toFixed(perS < 10 ? 3 : 1).padStart(8)} inferences/s  median ` +
        `${lat[lat.length >> 1].toFixed(2).padStart(8)} ms/batch  p90 ` +
        `${lat[Math.floor(lat.length * 9 / 10)].toFixed(2).padStart(8)} ms  (${lat.length} runs, ` +
        `session ${tCreate.toFixed(0)} ms, onnxruntime ${require('onnxruntime-node/package.json').version})`);
}
main().catch((e) => { console.error(e); process.exit(1); });
