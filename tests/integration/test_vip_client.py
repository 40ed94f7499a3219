"""Issue 27: VIP's own Python client (vip.py of VIP-python-client, what science-gateway users
script against) against the CARMIN facade, replayed call by call. Each request carries what the
client sends (Python requests; the key in an `apikey` header; no body to check a key or make a
directory; application/octet-stream uploads; JSON executions) and each answer is read the way
the client reads it: a JSON body whose keys are exactly errorCode and errorMessage is an error,
anything else is not (VipClient's detect_errors).

Issue 28, finding 6: an execution's results never take the place of a user's path (a file, a
directory with files, a file put in the execution's own directory), deleteFiles takes only
what the execution placed, a replaced file's blob goes, and a file cannot outlive its directory
when a PUT races the directory's DELETE."""
import json
import os
import sys
import threading
import time
import warnings

import requests
import urllib3

sys.path.insert(0, os.path.dirname(__file__))
from harness import Harness, run_tests  # noqa: E402

H = SRV = None
A = None
TENANT = "vip-client"


class VipClient:
    """The calls of vip.py, one method each, sending what it sends (written from its behaviour)."""

    def __init__(self, prefix, cafile):
        self.prefix = prefix           # ".../rest/"
        self.verify = False           # the test server's own certificate; what is checked is the API
        self.headers = {"apikey": None}
        self.session = self.new_session()

    def new_session(self):
        s = requests.Session()
        s.trust_env = False   # no REQUESTS_CA_BUNDLE of the machine over our verify
        s.verify = self.verify
        return s

    @staticmethod
    def detect_errors(rq):
        if not rq.headers.get("content-type", "").startswith("application/json"):
            return (False,)
        try:
            res = rq.json()
        except ValueError:
            return (False,)
        if isinstance(res, dict) and list(res.keys()) == ["errorCode", "errorMessage"]:
            return (True, res["errorCode"], res["errorMessage"])
        return (False,)

    def manage_errors(self, rq):
        res = self.detect_errors(rq)
        if res[0]:
            raise RuntimeError("Error {} from VIP : {}".format(res[1], res[2]))

    def set_api_key(self, value):
        rq = requests.put(self.prefix + "plateform", headers={"apikey": value}, verify=self.verify)
        res = self.detect_errors(rq)
        if res[0]:
            if res[1] == 40101:
                return False
            raise RuntimeError("Error {} from VIP : {}".format(res[1], res[2]))
        self.use_key(value)
        return True

    def use_key(self, value):
        """What set_api_key keeps once the key has passed."""
        self.headers["apikey"] = value
        self.session = self.new_session()
        self.session.headers.update(self.headers)

    def platform_info(self):
        rq = self.session.get(self.prefix + "platform", headers=self.headers)
        self.manage_errors(rq)
        return rq.json()

    def list_pipeline(self):
        rq = self.session.get(self.prefix + "pipelines", headers=self.headers)
        self.manage_errors(rq)
        return rq.json()

    def create_dir(self, path):
        rq = self.session.put(self.prefix + "path" + path, headers=self.headers)
        return not self.detect_errors(rq)[0]

    def upload(self, data, where_to_save):
        headers = {"apikey": self.headers["apikey"], "Content-Type": "application/octet-stream"}
        rq = self.session.put(self.prefix + "path" + where_to_save, headers=headers, data=data)
        return not self.detect_errors(rq)[0]

    def _path_action(self, path, action):
        rq = self.session.get(self.prefix + "path" + path + "?action=" + action, headers=self.headers)
        self.manage_errors(rq)
        return rq

    def exists(self, path):
        return self._path_action(path, "exists").json()["exists"]

    def list_elements(self, path):
        return [e for e in self._path_action(path, "list").json() if e["isDirectory"] is not True]

    def delete_path(self, path):
        rq = self.session.delete(self.prefix + "path" + path, headers=self.headers)
        return not self.detect_errors(rq)[0]

    def download(self, path):
        """The file's bytes, or None where the client returns False (any status but 200)."""
        rq = self.session.get(self.prefix + "path" + path + "?action=content", headers=self.headers, stream=True)
        return rq.content if rq.status_code == 200 else None

    def init_exec(self, pipeline, name="default", inputValues=None, resultsLocation="/vip/Home"):
        headers = {"apikey": self.headers["apikey"], "Content-Type": "application/json"}
        data = {"name": name, "pipelineIdentifier": pipeline, "inputValues": inputValues or {},
                "resultsLocation": resultsLocation}
        rq = self.session.post(self.prefix + "executions", headers=headers, json=data)
        self.manage_errors(rq)
        return rq.json()["identifier"]

    def execution_info(self, id_exec):
        rq = self.session.get(self.prefix + "executions/" + id_exec, headers=self.headers)
        self.manage_errors(rq)
        return rq.json()

    def get_exec_results(self, exec_id, timeout=None):
        rq = requests.get(self.prefix + "executions/" + exec_id + "/results", headers=self.headers,
                          timeout=timeout, verify=self.verify)
        self.manage_errors(rq)
        return rq.json()

    def kill_execution(self, exec_id, deleteFiles=False):
        url = self.prefix + "executions/" + exec_id + ("?deleteFiles=true" if deleteFiles else "")
        rq = self.session.delete(url, headers=self.headers)
        return not self.detect_errors(rq)[0]


def setup():
    global H, SRV, A
    warnings.simplefilter("ignore", ResourceWarning)
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    H = Harness()
    SRV = H.start_server(["--cpu-workers", "2"])
    A = SRV.client().json("POST", "/v1/api-keys", {"tenant": TENANT, "label": "vip"}, expect=201)["key"]


def vip():
    return VipClient("https://127.0.0.1:%d/rest/" % SRV.port, os.path.join(SRV.data_dir, "tls", "cert.pem"))


def signed_in():
    """A client holding the key (the key check itself is test_key_check_as_the_client_makes_it's)."""
    v = vip()
    v.use_key(A)
    return v


def wait_finished(v, ident, timeout=60):
    deadline = time.time() + timeout
    while True:
        info = v.execution_info(ident)
        if info["status"] in ("Finished", "ExecutionFailed", "Killed") or time.time() > deadline:
            assert info["status"] == "Finished", info
            return info
        time.sleep(0.2)


def test_key_check_as_the_client_makes_it():
    """setApiKey: PUT plateform, no body. A wrong key is 40101 (False), a good one no CARMIN
    error (True), as VIP's server answers; the key is checked before the path is routed."""
    v = vip()
    assert v.set_api_key("gjk_wrong_key") is False
    assert v.set_api_key("") is False
    assert v.set_api_key(A) is True
    raw = vip().session
    for method, path in (("GET", "no-such-route"), ("PUT", "plateform"), ("GET", "path/vip/Home?action=list"),
                         ("GET", "platform")):
        r = raw.request(method, v.prefix + path, headers={"apikey": "gjk_wrong_key"})
        assert r.status_code == 401 and VipClient.detect_errors(r)[:2] == (True, 40101), (method, path, r.text)
    for method, path in (("GET", "no-such-route"), ("PUT", "plateform"), ("DELETE", "path/vip/Home/x")):
        r = raw.request(method, v.prefix + path)
        assert r.status_code == 401 and VipClient.detect_errors(r)[:2] == (True, 40101), (method, path, r.text)
    r = raw.get(v.prefix + "no-such-route", headers={"apikey": A})   # a good key: routed, then 40401
    assert r.status_code == 404 and VipClient.detect_errors(r)[:2] == (True, 40401), r.text
    assert raw.get(v.prefix + "platform").status_code == 200         # the one route needing no key


def test_client_replay():
    """vip.py's calls in a gateway user's order: key, platform, pipelines, a directory, an upload,
    an execution into a results directory that does not exist yet, polling, results, download,
    listing, deletion."""
    v = vip()
    assert v.set_api_key("gjk_wrong_key") is False
    assert v.set_api_key(A) is True
    assert v.platform_info()["supportedAPIVersion"] == "0.3.1"
    assert {"noop", "recon"} <= {p["identifier"] for p in v.list_pipeline()}
    assert v.create_dir("/vip/Home/study") is True
    data = os.urandom(3000)
    assert v.upload(data, "/vip/Home/study/input.bin") is True
    assert v.exists("/vip/Home/study/input.bin") is True
    assert v.exists("/vip/Home/study/out") is False
    ident = v.init_exec("noop", "replay", {"input": "/vip/Home/study/input.bin"}, "/vip/Home/study/out")
    assert v.exists("/vip/Home/study/out") is True                   # made, as VIP makes it
    info = wait_finished(v, ident)
    assert info["resultsLocation"] == "/vip/Home/study/out", info
    returned = [u for urls in info["returnedFiles"].values() for u in urls]
    results = v.get_exec_results(ident)
    paths = [p["platformPath"] for p in results]
    assert paths == ["/vip/Home/study/out/%s/result.json" % ident], results
    assert returned == ["/rest/path%s?action=content" % paths[0]], info
    body = v.download(paths[0])
    assert body is not None and json.loads(body)["inputs"]["input"] == len(data), body
    assert v.download("/vip/Home/study/out/nothing-here") is None
    assert [e["platformPath"] for e in v.list_elements("/vip/Home/study/out/" + ident)] == paths
    assert [e["platformPath"] for e in v.list_elements("/vip/Home/study")] == ["/vip/Home/study/input.bin"]
    assert v.kill_execution(ident, deleteFiles=True) is True
    assert v.exists(paths[0]) is False and v.exists("/vip/Home/study/out") is True
    assert v.delete_path("/vip/Home/study") is True
    assert v.exists("/vip/Home/study") is False
    assert v.delete_path("/vip/Home/study") is False                 # 40401: the client's False


def test_results_location_refusals():
    """Made when missing, but never over a file, and nothing made when the execution is refused."""
    v = signed_in()
    assert v.upload(b"a file", "/vip/Home/afile")
    for loc, code in (("/vip/Home/afile", 40901), ("/vip/Home/afile/below", 40901), ("/elsewhere/out", 40001),
                      ("/vip/Home/../x", 40001)):
        try:
            v.init_exec("noop", "refused", {}, loc)
            raise AssertionError("accepted " + loc)
        except RuntimeError as e:
            assert str(e).startswith("Error %d " % code), (loc, e)
    try:   # refused for its params, after its results location was looked at: nothing stays
        v.init_exec("noop", "refused", {"params": {"sleep_ms": -1}}, "/vip/Home/never/made")
        raise AssertionError("accepted")
    except RuntimeError as e:
        assert str(e).startswith("Error 40001 "), e
    assert v.exists("/vip/Home/never") is False
    assert v.delete_path("/vip/Home/afile")


def user_file(v, path, data):
    assert v.upload(data, path), path
    return data


def test_results_never_replace_user_paths():
    """Finding 6: a user's res/result.json, a directory res2/result.json holding a file, and a file
    the user puts in the execution's own directory before its results come all stay as they were,
    through the execution and its deletion with deleteFiles."""
    v = signed_in()
    assert v.create_dir("/vip/Home/res")
    mine = user_file(v, "/vip/Home/res/result.json", b"the user's own result.json")
    assert v.create_dir("/vip/Home/res2") and v.create_dir("/vip/Home/res2/result.json")
    kept = user_file(v, "/vip/Home/res2/result.json/keep.txt", b"keep me")
    first = v.init_exec("noop", "into res", {}, "/vip/Home/res")
    wait_finished(v, first)
    assert v.download("/vip/Home/res/result.json") == mine
    second = v.init_exec("noop", "into res2", {"params": {"sleep_ms": 4000}}, "/vip/Home/res2")
    squatter = user_file(v, "/vip/Home/res2/%s/result.json" % second, b"put there before the results")
    wait_finished(v, second)
    assert v.download("/vip/Home/res2/result.json/keep.txt") == kept
    assert v.download("/vip/Home/res2/%s/result.json" % second) == squatter
    placed = {}
    for ident, where in ((first, "/vip/Home/res/%s/result.json"), (second, "/vip/Home/res2/%s/result-1.json")):
        results = v.get_exec_results(ident)
        assert [p["platformPath"] for p in results] == [where % ident], results
        info = v.execution_info(ident)
        assert info["returnedFiles"] == {"results": ["/rest/path%s?action=content" % (where % ident)]}, info
        placed[ident] = where % ident
        assert json.loads(v.download(placed[ident]))["stage"] == 0
    for ident in (first, second):
        assert v.kill_execution(ident, deleteFiles=True)
        assert v.exists(placed[ident]) is False
    assert v.exists("/vip/Home/res/" + first) is False                # its own directory, emptied: gone
    assert v.download("/vip/Home/res2/%s/result.json" % second) == squatter   # kept, and its directory
    assert v.download("/vip/Home/res/result.json") == mine
    assert v.download("/vip/Home/res2/result.json/keep.txt") == kept
    for path in ("/vip/Home/res", "/vip/Home/res2"):
        assert v.delete_path(path)


def test_results_directory_taken_meanwhile():
    """The execution's directory replaced by a file of the user's before its results come: they
    go to a fresh directory beside it; its location replaced by a file: under home."""
    v = signed_in()
    sleepy = {"params": {"sleep_ms": 4000}}
    beside, home = v.init_exec("noop", "beside", sleepy, "/vip/Home/taken"), v.init_exec("noop", "home", sleepy,
                                                                                         "/vip/Home/gone")
    assert v.delete_path("/vip/Home/taken/" + beside) and v.delete_path("/vip/Home/gone")
    mine = user_file(v, "/vip/Home/taken/" + beside, b"a file where the results were to go")
    also = user_file(v, "/vip/Home/gone", b"a file where the results location was")
    for ident, where in ((beside, "/vip/Home/taken/%s-1/result.json"), (home, "/vip/Home/%s/result.json")):
        wait_finished(v, ident)
        assert [p["platformPath"] for p in v.get_exec_results(ident)] == [where % ident], v.get_exec_results(ident)
    assert v.download("/vip/Home/taken/" + beside) == mine and v.download("/vip/Home/gone") == also
    for ident in (beside, home):
        assert v.kill_execution(ident, deleteFiles=True)
    assert v.exists("/vip/Home/taken/%s-1" % beside) is False and v.exists("/vip/Home/" + home) is False
    for path in ("/vip/Home/taken", "/vip/Home/gone"):
        assert v.delete_path(path)


def tenant_blobs():
    return int(H.scalar("SELECT count(*) FROM blobs b JOIN tenants t ON t.id = b.tenant_id WHERE t.name = '%s'"
                        % TENANT))


def test_replaced_file_leaves_no_blob():
    """Finding 6: six PUTs of one path hold one blob, not six."""
    v = signed_in()
    before = tenant_blobs()
    for i in range(6):
        assert v.upload(b"version %d" % i, "/vip/Home/often.txt")
    assert v.download("/vip/Home/often.txt") == b"version 5"
    assert tenant_blobs() == before + 1, tenant_blobs() - before
    assert v.delete_path("/vip/Home/often.txt")
    assert tenant_blobs() == before


ORPHANS = ("SELECT count(*) FROM carmin_paths p WHERE p.parent <> '/vip/Home' AND NOT EXISTS"
           " (SELECT 1 FROM carmin_paths d WHERE d.tenant_id = p.tenant_id AND d.path = p.parent)")


def test_put_racing_delete_leaves_no_orphan():
    """Finding 6: a file PUT while its directory is deleted either lands before the delete (and
    goes with it) or is refused (409, nothing stored): never a file under no directory."""
    v = signed_in()
    before = tenant_blobs()
    answers = set()
    for i in range(25):
        d = "/vip/Home/race%d" % i
        assert v.create_dir(d)
        got = {}
        start = threading.Barrier(2)

        def put():
            s = vip().session
            start.wait()
            got["put"] = s.put(v.prefix + "path" + d + "/f.bin", data=b"x" * 50000,
                               headers={"apikey": A, "Content-Type": "application/octet-stream"})

        def delete():
            s = vip().session
            start.wait()
            got["delete"] = s.delete(v.prefix + "path" + d, headers={"apikey": A})

        threads = [threading.Thread(target=put), threading.Thread(target=delete)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        put_status, delete_status = got["put"].status_code, got["delete"].status_code
        assert put_status in (201, 409) and delete_status == 204, (i, got["put"].text, got["delete"].text)
        answers.add(put_status)
        assert v.exists(d + "/f.bin") is False and v.exists(d) is False, (i, put_status)
    assert H.scalar(ORPHANS) == "0"
    assert tenant_blobs() == before, (tenant_blobs() - before, answers)


def test_server_stops_clean():
    code = SRV.terminate()
    log = SRV.log_text()
    assert code == 0, log[-3000:]
    assert "Sanitizer" not in log and "runtime error" not in log, log[-3000:]


if __name__ == "__main__":
    setup()
    try:
        run_tests([test_key_check_as_the_client_makes_it, test_client_replay, test_results_location_refusals,
                   test_results_never_replace_user_paths, test_results_directory_taken_meanwhile,
                   test_replaced_file_leaves_no_blob,
                   test_put_racing_delete_leaves_no_orphan, test_server_stops_clean])
    finally:
        H.close()
