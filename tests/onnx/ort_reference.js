// ort_reference.js — ONNX Runtime (CPU execution provider) as a second, independent
// reference: runs MODEL on a float32 NCHW input file and writes its first output.
//   NODE_PATH=DIR/node_modules node ort_reference.js MODEL.onnx IN.f32 OUT.f32 N C H W
const fs = require('fs');
const ort = require('onnxruntime-node');

async function main() {
    const [model, inPath, outPath] = process.argv.slice(2, 5);
    const dims = process.argv.slice(5, 9).map((x) => parseInt(x, 10));
    const buf = fs.readFileSync(inPath);
    const data = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
    if (data.length !== dims.reduce((a, b) => a * b, 1))
        throw new Error(`input has ${data.length} values, shape ${dims} wants another count`);
    const sess = await ort.InferenceSession.create(model, {
        executionProviders: ['cpu'], graphOptimizationLevel: 'disabled' });
    const feeds = {};
    feeds[sess.inputNames[0]] = new ort.Tensor('float32', data, dims);
    const res = await sess.run(feeds);
    const out = res[sess.outputNames[0]].data;
    fs.writeFileSync(outPath, Buffer.from(out.buffer, out.byteOffset, out.byteLength));
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
