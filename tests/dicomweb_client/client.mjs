// client.mjs -- the npm dicomweb-client library, unchanged, against a running gpujobd
// (test_dicomweb_client.py starts it and writes the DICOM files with DCMTK). Node has no
// XMLHttpRequest, which the library uses: xhr2 provides it (Node's https, so the
// server's CA comes from NODE_EXTRA_CA_CERTS). Prints one JSON line of what it saw;
// the Python side asserts on it and on the database.
import { readFileSync } from 'node:fs';
import XHR2 from 'xhr2';
import dicomweb from 'dicomweb-client';

globalThis.XMLHttpRequest = XHR2;
const { api } = dicomweb;
const cfg = JSON.parse(process.env.GJ_DICOMWEB_TEST);
const client = new api.DICOMwebClient({ url: cfg.url, headers: { Authorization: `Bearer ${cfg.key}` } });
const buffer = (path) => {
  const b = readFileSync(path);
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
};
const value = (obj, tag) => (obj[tag] && obj[tag].Value ? obj[tag].Value[0] : undefined);
const out = {};

const datasets = cfg.files.map(buffer);
out.store1 = await client.storeInstances({ datasets: datasets.slice(0, 1) });
out.store2 = await client.storeInstances({ datasets });            // the first again, and the second
const studies = await client.searchForStudies();
out.studies = studies.map((s) => value(s, '0020000D'));
out.byPatient = (await client.searchForStudies({ queryParams: { PatientID: cfg.patientId } }))
  .map((s) => [value(s, '0020000D'), value(s, '00201208')]);
out.none = await client.searchForStudies({ queryParams: { PatientID: 'nobody' } });
out.series = (await client.searchForSeries({ studyInstanceUID: cfg.study })).map((s) => value(s, '0020000E'));
out.instances = (await client.searchForInstances({ studyInstanceUID: cfg.study })).map((s) => value(s, '00080018'));
const metadata = await client.retrieveStudyMetadata({ studyInstanceUID: cfg.study });
out.metadata = metadata.map((m) => [value(m, '00080018'), value(m, '00100020')]);
// every attribute of the instance (not only those QIDO keeps): Rows, BitsAllocated ...
out.metadataAttrs = [value(metadata[0], '00280010'), value(metadata[0], '00280100'), '7FE00010' in metadata[0]];
out.includefield = (await client.searchForStudies({ queryParams: { includefield: 'StudyDescription,PatientID' } }))
  .map((s) => [value(s, '00081030'), value(s, '00100020')]);
out.defaultFields = (await client.searchForStudies()).map((s) => '00081030' in s);
const png = await client.retrieveInstanceRendered({
  studyInstanceUID: cfg.study, seriesInstanceUID: cfg.series, sopInstanceUID: cfg.sops[0],
  mediaTypes: [{ mediaType: 'image/png' }], queryParams: { window: '128,256,linear' } });
out.renderedPng = Buffer.from(Array.isArray(png) ? png[0] : png).subarray(1, 4).toString('latin1');  // one part
try {   // the parameters reach the server: a bad window is its 400
  await client.retrieveInstanceRendered({ studyInstanceUID: cfg.study, seriesInstanceUID: cfg.series,
    sopInstanceUID: cfg.sops[0], mediaTypes: [{ mediaType: 'image/png' }], queryParams: { window: '128' } });
  out.badWindow = 'rendered';
} catch (e) {
  out.badWindow = e.status;
}
const instance = await client.retrieveInstance({ studyInstanceUID: cfg.study, seriesInstanceUID: cfg.series,
                                                 sopInstanceUID: cfg.sops[1] });
out.instanceSame = Buffer.from(instance).equals(readFileSync(cfg.files[1]));
try {
  await client.retrieveInstance({ studyInstanceUID: cfg.study, seriesInstanceUID: cfg.series,
                                  sopInstanceUID: '1.2.3.4' });
  out.missing = 'found';
} catch (e) {
  out.missing = e.status;
}
console.log(JSON.stringify(out));
