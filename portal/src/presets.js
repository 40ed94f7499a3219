// presets.js — "try it": one example per kind, so that a newcomer gets a result in one click.
// Input files are shipped with the portal (embedded in gpujobd beside this script): the
// thesis's 12-node network (tests/brkga/data), and a synthetic chest radiograph made by
// tools/make_portal_sample.py from the demo model's image generator.

const CONE = {
  type: 'cone3d',
  angles_deg: { start: 0, step: 3, count: 120 },
  detector: { cols: 96, rows: 64, spacing_u: 2, spacing_v: 2 },
  source_origin_mm: 300,
  source_detector_mm: 600,
};

export const PRESETS = {
  phantom: {
    title: 'a 3D head phantom',
    text: 'The Kak-Slaney head phantom on a 64 × 64 × 48 grid (2 mm voxels), with its exact cone-beam '
      + 'projections over 120 views: reconstruct them next (the job page offers it on projections.nrrd).',
    params: { phantom: 'kak-slaney', geometry: CONE, volume: { nx: 64, ny: 64, nz: 48, voxel_mm: 2 } },
    inputs: {},
  },
  recon: {
    title: 'reconstruct a phantom',
    text: 'A reconstruction needs projections: run the phantom example first, then choose '
      + '“Reconstruct” on its projections.nrrd. This fills in the same geometry and grid, FDK.',
    params: { algorithm: 'fdk', geometry: CONE, volume: { nx: 64, ny: 64, nz: 48, voxel_mm: 2 } },
    inputs: {},
  },
  brkga: {
    title: "the thesis's 12-node network",
    text: 'IP/MPLS over WSON design of the thesis (Tables 5-3 to 5-5: Network.xml, Demands.xml, '
      + 'Params.xml), with a budget of 300 generations instead of 10 s so that it ends alike everywhere.',
    params: { primary_stop: 'generations', max_generations: 300, stats_interval: 5, seed: 49345727592 },
    inputs: { network: ['net12.xml'], demands: ['dem12.xml'], params: ['params12.xml'] },
  },
  infer: {
    title: 'a synthetic chest radiograph',
    text: 'One synthetic DX image (not a patient’s) through chest-xray-demo, a demo model trained on '
      + 'synthetic images: it is not a diagnostic model.',
    params: { model: 'chest-xray-demo' },
    inputs: { dicom: ['chest-synthetic.dcm'] },
  },
  noop: {
    title: 'a diagnostic job',
    text: 'Sleeps five seconds while reporting progress: enough to watch it run, or cancel it.',
    params: { sleep_ms: 5000 },
    inputs: {},
  },
};

const TYPES = { xml: 'application/xml', dcm: 'application/dicom' };

// The shipped file as a File, to upload like a dropped one.
export async function presetFile(name) {
  const resp = await fetch(new URL(`./${name}`, import.meta.url));
  if (!resp.ok) throw new Error(`the example file ${name} could not be loaded (${resp.status})`);
  const blob = await resp.blob();
  return new File([blob], name, { type: TYPES[name.split('.').pop()] || 'application/octet-stream' });
}
