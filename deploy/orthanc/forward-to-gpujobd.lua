-- forward-to-gpujobd.lua: each study that has been stable for StableAge seconds (no new
-- instance arrived) is sent to gpujobd by STOW-RS through the DICOMweb plugin's
-- "gpujobd" server. gpujobd acknowledges the instances it already holds and makes one
-- job for the new ones only: a study that grows, or comes back with the Structured
-- Report gpujobd delivered into it, makes no second job for what it had.
-- The reports themselves (Modality SR) are not what the models read: a study is
-- forwarded only when it holds an instance of another modality.

function OnStableStudy(studyId, tags, metadata)
  local series = ParseJson(RestApiGet('/studies/' .. studyId .. '/series'))
  local images = false
  for _, s in ipairs(series) do
    if s['MainDicomTags']['Modality'] ~= 'SR' then
      images = true
    end
  end
  if not images then
    return
  end
  -- Asynchronous: the forward is one of Orthanc's jobs, so the Lua engine (one thread,
  -- which also runs for the reports gpujobd sends back) is not held while gpujobd stores
  -- the study; measured twice the studies per minute (BENCHMARKS.md). A forward that
  -- fails stays in Orthanc's job list (GET /jobs): POST /jobs/{id}/resubmit sends it again.
  local body = DumpJson({ Resources = { studyId }, Synchronous = false }, true)
  local answer = RestApiPost('/dicom-web/servers/gpujobd/stow', body)
  if answer then
    print('study ' .. studyId .. ' queued for gpujobd')
  else
    print('study ' .. studyId .. ' could not be queued for gpujobd')
  end
end
