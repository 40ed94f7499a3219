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
  local body = DumpJson({ Resources = { studyId }, Synchronous = true }, true)
  -- a refused request is logged by Orthanc and gives no answer (or raises, by version)
  local ok, answer = pcall(RestApiPost, '/dicom-web/servers/gpujobd/stow', body)
  if ok and answer then
    print('forwarded study ' .. studyId .. ' to gpujobd')
  else
    -- Orthanc logs the HTTP error; the study is sent again when it next becomes stable,
    -- or by an operator: POST /dicom-web/servers/gpujobd/stow {"Resources": [id]}
    print('forwarding study ' .. studyId .. ' to gpujobd failed')
  end
end
