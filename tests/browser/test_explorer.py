"""The plan explorer in a real browser: ask, compare, look inside a plan, deep links, errors
next to their field, keyboard use and an accessibility check; the docs work offline."""

import json
import re
from pathlib import Path

import pytest

from planner.cost.caveats import (
    ANCHORED_MEASURED_OVER_PREDICTED,
    MEASURED_OVER_PREDICTED_BY_GPU,
    best_dense_mfu,
)
from planner.specs import ModelSpec

pytestmark = pytest.mark.slow

SMALL = {"model": "llama3-8b", "cluster": "dgx-h100", "num_nodes": "1",
         "global_batch_size": "64", "seq_length": "4096", "top_k": "3"}


def open_explorer(page, path="/"):
    page.goto(path)
    page.wait_for_selector("body[data-ready=true]")


def fill(page, values):
    page.select_option("#model", values["model"])
    page.select_option("#cluster", values["cluster"])
    for key in ("num_nodes", "global_batch_size", "seq_length", "top_k"):
        page.fill(f"#{key}", values[key])


def test_a_plan_asked_in_the_page_shows_its_table_charts_timeline_and_launch(page):
    open_explorer(page)
    fill(page, SMALL)
    page.fill("#r-tp", "1,2")
    page.click("#plan-button")
    page.wait_for_selector("#plans-table tbody tr")
    assert re.fullmatch(r".*/plans/plan-[0-9a-f]+", page.url)
    rows = page.locator("#plans-table tbody tr")
    assert rows.count() == 3
    tps = [int(rows.nth(i).locator("td").nth(1).inner_text()) for i in range(3)]
    assert set(tps) <= {1, 2}                                # the restriction was sent
    assert "OPTIMAL" in page.inner_text("#result-summary")
    # One stacked bar per plan, compute in each; memory bars with the capacity mark.
    assert page.locator('#breakdown-chart rect[data-part="compute"]').count() == 3
    assert page.locator('#memory-chart line[data-part="capacity"]').count() == 3
    # The searched space: sampled plans, the frontier among them, the chosen three marked.
    assert page.locator("#space-chart circle.point").count() > 20
    assert page.locator("#space-chart circle.frontier").count() >= 1
    assert page.locator("#space-chart g.chosen").count() == 3
    # Plan 1 opens with its predicted timeline and launch artifacts.
    page.wait_for_selector("#timeline rect.span")
    spans = page.locator("#timeline rect.span title").all_text_contents()
    assert any(t.startswith("forward") for t in spans)
    assert any(t.startswith("backward") for t in spans)
    assert "Predicted step of" in page.get_attribute("#timeline svg", "aria-label")
    page.wait_for_selector("#launch-megatron", state="attached")
    assert "--tensor-model-parallel-size" in page.text_content("#launch-megatron")
    assert "runner-up" in page.inner_text("#detail-why")
    # Sorting by step time, descending, puts the slowest plan first.
    page.click("#plans-table th >> text=step (s)")
    page.click("#plans-table th >> text=step (s)")
    heads = [t.strip() for t in page.locator("#plans-table thead th").all_inner_texts()]
    step = heads.index("step (s)") - 1                      # (the rank is the row's th)
    steps = [float(rows.nth(i).locator("td").nth(step).inner_text()) for i in range(3)]
    assert steps == sorted(steps, reverse=True)
    # Another plan's details.
    page.click("text=Open plan 2")
    page.wait_for_function("document.querySelector('#detail-title').textContent"
                           ".startsWith('Plan 2')")


def test_a_deep_link_opens_a_stored_plan(page, service):
    import httpx

    body = {"model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 2},
            "training": {"global_batch_size": 128, "seq_length": 4096},
            "search": {"top_k": 2, "pp": 2}}
    result = httpx.post(service.url + "/v1/plans", json=body, timeout=60).json()
    open_explorer(page, f"/plans/{result['id']}")
    page.wait_for_selector("#timeline rect.span")
    assert page.locator("#plans-table tbody tr").count() == 2
    # Two pipeline stages: compute lanes for both appear in the timeline.
    labels = page.locator("#timeline svg text").all_text_contents()
    assert any(t.startswith("stage 0") for t in labels)
    assert any(t.startswith("stage 1") for t in labels)
    assert page.locator(f'#stored-plans a[href="/plans/{result["id"]}"]').count() == 1


def test_a_plan_over_pools_names_each_stages_pool(page, service):
    """A cluster of H100 and A100 pools: the plan's detail says which stages run on which pool
    and the timeline says why it is not drawn."""
    import httpx

    body = {"model": {"preset": "llama3-8b"},
            "cluster": {"pools": [{"preset": "dgx-h100", "num_nodes": 1},
                                  {"preset": "dgx-a100", "num_nodes": 2}]},
            "training": {"global_batch_size": 64, "seq_length": 4096}, "search": {"top_k": 1}}
    result = httpx.post(service.url + "/v1/plans", json=body, timeout=60).json()
    stages = result["plans"][0]["stages"]
    assert {s["pool"] for s in stages} == {0, 1}
    open_explorer(page, f"/plans/{result['id']}")
    page.wait_for_selector("#timeline .error")
    why = page.inner_text("#detail-why")
    assert "on pool 0 (h100-sxm" in why and "on pool 1 (a100-80gb" in why
    assert "pipeline over pools" in page.inner_text("#timeline")


def test_an_invalid_request_shows_the_reason_next_to_its_field(page):
    open_explorer(page)
    fill(page, {**SMALL, "global_batch_size": "-3"})
    page.click("#plan-button")
    err = page.locator('.field[data-field="training.global_batch_size"] .field-error')
    err.wait_for()
    assert "greater than or equal to 1" in err.inner_text()
    assert page.get_attribute("#global_batch_size", "aria-invalid") == "true"
    described = page.get_attribute("#global_batch_size", "aria-describedby")
    assert page.locator(f"#{described}").inner_text() == err.inner_text()
    assert "refused" in page.inner_text("#form-error")
    # A JSON request that does not parse is refused in the page, before any request.
    page.click("#json-details summary")
    page.fill("#request-json", "{not json")
    page.click("#plan-button")
    page.wait_for_function("document.querySelector('#form-error').textContent"
                           ".includes('does not parse')")


def test_keyboard_only_and_the_accessibility_check(page):
    from axe_playwright_python.sync_playwright import Axe

    open_explorer(page)
    fill(page, SMALL)
    page.focus("#top_k")
    for _ in range(40):                                       # Tab to the Plan button
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "plan-button":
            break
    assert page.evaluate("document.activeElement.id") == "plan-button"
    page.keyboard.press("Enter")
    page.wait_for_selector("#timeline rect.span")
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def test_a_job_reports_progress_and_lands_on_its_plan(page):
    open_explorer(page)
    fill(page, SMALL)
    page.click("#job-button")
    page.wait_for_selector("#plans-table tbody tr")
    assert "succeeded" in page.inner_text("#job-state")
    assert "/plans/plan-" in page.url


@pytest.mark.parametrize("path, ready", [("/docs", ".opblock"), ("/redoc", "[role=search]")])
def test_the_api_docs_render_without_internet(page, path, ready):
    page.goto(path)
    page.wait_for_selector(ready, timeout=30000)
    assert "plans" in page.content()


def test_a_validation_shows_predicted_and_measured_bars(page, service):
    """A validation of a small model on 4 local gloo ranks, opened by its deep link."""
    import httpx

    tiny = {"model": {"name": "tiny-gpt", "num_layers": 4, "hidden_size": 128,
                      "num_attention_heads": 4, "vocab_size": 2048, "ffn_type": "gelu"},
            "cluster": {"preset": "local-cpu"},
            "training": {"global_batch_size": 8, "seq_length": 128, "precision": "fp32"},
            "search": {"top_k": 2, "cp": 1, "zero_stage": 0, "vpp": 1, "micro_batch_size": 1}}
    with httpx.Client(base_url=service.url, timeout=60) as c:
        plan_id = c.post("/v1/plans", json=tiny).json()["id"]
        r = c.post(f"/v1/plans/{plan_id}/validations", json={"top_k": 2, "nproc": 4,
                                                              "steps": 2, "timeout_s": 120})
        assert r.status_code == 202, r.text
        validation = r.json()["id"]
    open_explorer(page, f"/validations/{validation}")
    page.wait_for_selector("#validation-chart rect.measured", timeout=180000)
    assert "succeeded" in page.inner_text("#validation-summary")
    assert "Kendall tau" in page.inner_text("#validation-summary")
    assert page.locator("#validation-chart svg").count() == 2          # one per plan
    predicted = page.locator("#validation-chart rect.predicted title").all_text_contents()
    assert any(t.startswith("step_time_s predicted") for t in predicted)
    assert page.locator(f'#stored-validations a[href="/validations/{validation}"]').count() == 1


def test_a_protected_service_asks_for_the_token_and_keeps_it_in_the_tab(browser, tmp_path):
    from api.live import live_server

    env = {"PLANNER_API_TOKEN": "s3cret-token", "PLANNER_PROTECT_READS": "true"}
    with live_server(f"sqlite:///{tmp_path / 'p.db'}", env=env) as srv:
        context = browser.new_context(base_url=srv.url)
        page = context.new_page()
        page.goto("/")
        page.wait_for_selector("#token-form:not([hidden])")     # reads were refused: 401
        assert page.evaluate("document.activeElement.id") == "token"
        page.fill("#token", "s3cret-token")
        page.press("#token", "Enter")
        page.wait_for_selector("#model option[value=llama3-8b]", state="attached")
        fill(page, SMALL)
        page.click("#plan-button")
        page.wait_for_selector("#plans-table tbody tr")
        # Kept in this tab's sessionStorage only: no cookie, nothing in the address.
        assert page.evaluate("sessionStorage.getItem('planner-token')") == "s3cret-token"
        assert context.cookies() == [] and "s3cret" not in page.url
        context.close()


def test_stored_clusters_calibrations_and_a_calibrations_plot(page, service):
    import httpx

    from tests.nccl_logs import make_log

    with httpx.Client(base_url=service.url, timeout=60) as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "name": "lab-h100",
                                           "num_nodes": 2}).json()["id"]
        text, _, _ = make_log(op="all_reduce", ranks=8)
        cal = c.post(f"/v1/clusters/{cid}/calibrations",
                     json={"source": "nccl-tests", "logs": [text]}).json()["id"]
    open_explorer(page)
    page.wait_for_selector(f'#stored-clusters a[href="/calibrations/{cal}"]')
    assert "lab-h100" in page.inner_text("#stored-clusters")
    page.click(f'#stored-clusters a[href="/calibrations/{cal}"]')
    page.wait_for_selector("#calibration-plot img")
    assert "all_reduce" in page.inner_text("#calibration-summary")
    assert "all_reduce" in page.get_attribute("#calibration-plot img", "alt")
    # The plot (the service's SVG) decoded and drew.
    assert page.evaluate("document.querySelector('#calibration-plot img').naturalWidth") > 0


def test_an_anchor_stored_on_a_cluster_shows_its_speeds_and_runs(page, service):
    import httpx

    run = json.loads((Path(__file__).resolve().parents[2] / "examples"
                      / "anchor-llama3.1-8b.json").read_text())["runs"][0]
    with httpx.Client(base_url=service.url, timeout=60) as c:
        cid = c.post("/v1/clusters", json={"preset": "dgx-h100", "name": "lab-anchored",
                                           "num_nodes": 1}).json()["id"]
        cal = c.post(f"/v1/clusters/{cid}/calibrations", json={
            "source": "anchor", "stack": "megatron-core 0.14", "runs": [run]}).json()["id"]
    open_explorer(page)
    page.wait_for_selector(f'#stored-clusters a[href="/calibrations/{cal}"]')
    assert "anchor (megatron-core 0.14)" in page.inner_text("#stored-clusters")
    page.click(f'#stored-clusters a[href="/calibrations/{cal}"]')
    page.wait_for_selector("#calibration-plot li")
    summary = page.inner_text("#calibration-summary")
    assert f"Anchor {cal}: kernel speed 1.1303" in summary
    assert 'name the stack "megatron-core 0.14"' in summary
    assert "measured 12.8 s, the model 14.4 s (-11.4%)" in page.inner_text("#calibration-plot")


def test_an_infeasible_answer_shows_its_reasons(page):
    open_explorer(page)
    fill(page, {**SMALL, "model": "llama3-405b"})
    page.fill("#r-tp", "1")
    page.click("#plan-button")
    page.wait_for_selector("#infeasible li")
    assert "INFEASIBLE" in page.inner_text("#result-summary")
    assert page.locator("#plans-table tbody tr").count() == 0
    assert "GiB" in page.inner_text("#infeasible")
    assert page.is_hidden("#detail")


def test_a_moe_answer_shows_its_settings_hint(page):
    # Qwen3-30B-A3B on two nodes under the default dispatch: the page lists the hint the
    # result carries (tests/test_settings_hints.py), the plan and the changed settings.
    open_explorer(page)
    fill(page, {**SMALL, "model": "qwen3-30b-a3b", "num_nodes": "2",
                "global_batch_size": "1024", "top_k": "1"})
    page.click("#plan-button")
    page.wait_for_selector("#settings-hints li")
    text = page.inner_text("#settings-hints")
    assert 'moe_dispatcher = "deepep", moe_a2a_overlap = true' in text
    assert "dp16 tp1 pp1 cp1 ep16 vpp1" in text and "faster" in text
    # A dense answer has none.
    fill(page, SMALL)
    page.click("#plan-button")
    page.wait_for_selector("#settings-hints li", state="detached")
    assert page.locator("#settings-hints li").count() == 0


def test_switching_plans_quickly_shows_only_the_last_plans_launch_files(page):
    open_explorer(page)
    fill(page, SMALL)
    page.click("#plan-button")
    page.wait_for_selector("#plans-table tbody tr")
    for n in (2, 3, 1, 3):              # before the previous plan's requests come back
        page.click(f"text=Open plan {n}")
    page.wait_for_selector("#launch-hostfile, #launch summary >> text=hostfile",
                           state="attached")
    page.wait_for_timeout(1000)          # any stale answer would have landed by now
    summaries = page.locator("#launch > details > summary").all_text_contents()
    assert len(summaries) == 7           # one per format, none twice
    assert page.inner_text("#detail-title").startswith("Plan 3")


def test_a_plan_above_every_published_run_shows_its_caveat(page):
    """Llama 3 8B on one DGX A100 node at 8,192 tokens: the winner's predicted MFU is above the
    best any published dense A100 run of a model as large measured, and the plan's details
    say so."""
    open_explorer(page)
    fill(page, {**SMALL, "cluster": "dgx-a100", "seq_length": "8192", "top_k": "1"})
    page.click("#plan-button")
    page.wait_for_selector("#detail-caveats li")
    note = page.inner_text("#detail-caveats")
    run_id = best_dense_mfu("a100", "16-bit", ModelSpec.from_preset("llama3-8b").num_params)[1]
    assert "Caveat: predicted MFU" in note and run_id in note
    # The model's track record on dense runs, scaled to this plan's step time.
    why = page.inner_text("#detail-why")
    runs, sources = MEASURED_OVER_PREDICTED_BY_GPU[("dense", "a100")][:2]
    assert (f"8 in 10 of the {runs} held-out published dense runs on A100 ({sources} sources, "
            "each weighing the same) would have measured") in why


def test_an_anchored_request_shows_the_anchored_track_record(page):
    """A pasted request anchored on a measured run (efficiency.compute_scale, as `planner
    calibrate anchor` fits it): the plan's details quote the anchored runs' band."""
    open_explorer(page)
    page.click("#json-details summary")
    page.fill("#request-json", json.dumps({
        "model": {"preset": "llama3-8b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 1},
        "training": {"global_batch_size": 64, "seq_length": 4096},
        "efficiency": {"compute_scale": 1.1, "anchor": "cal-lab"}, "search": {"top_k": 1}}))
    page.click("#plan-button")
    page.wait_for_selector("#plans-table tbody tr")
    runs, sources = ANCHORED_MEASURED_OVER_PREDICTED[:2]
    page.wait_for_selector("#detail-why:has-text('another run of their stack')")
    why = page.inner_text("#detail-why")
    assert (f"8 in 10 of the {runs} held-out published runs predicted from another run of "
            f"their stack on their GPU ({sources} sources, each weighing the same) would have "
            "measured"
            ) in why
    assert "(speeds from anchor cal-lab)" in why


def test_the_stacks_speeds_fitted_in_the_page_anchor_the_plans(page):
    """Measured runs pasted under "Your stack" are fitted by POST /v1/anchors, which fills the
    kernel speed; a plan asked then carries the anchored band; runs the service refuses show
    why."""
    example = (Path(__file__).resolve().parents[2] / "examples"
               / "anchor-llama3.1-8b.json").read_text()
    open_explorer(page)
    page.click("#anchor-details summary")
    page.fill("#anchor-json", example)
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('Kernel speed')")
    assert page.input_value("#compute_scale") == "1.1303"
    assert page.input_value("#network_scale") == ""
    assert "measured 12.8 s, the model 14.4 s (-11.4%)" in page.inner_text("#anchor-result")
    fill(page, {**SMALL, "top_k": "1"})
    page.click("#plan-button")
    page.wait_for_selector("#detail-why:has-text('another run of their stack')")
    page.fill("#anchor-json", '{"runs": []}')
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('refused')")
    assert "runs: List should have at least 1 item" in page.inner_text("#anchor-result")


def paste_a_log(page, log: str, answer: str) -> None:
    """The explorer on a DGX H100 cluster, ``log`` pasted under "Your stack" and fitted, until
    the result says ``answer``."""
    open_explorer(page)
    page.select_option("#cluster", "dgx-h100")
    page.click("#anchor-details summary")
    page.fill("#anchor-json", log)
    page.click("#anchor-button")
    page.wait_for_selector(f"#anchor-result:has-text('{answer}')")


def test_a_megatron_log_pasted_in_the_page_is_read_and_fitted(page):
    """Rank 0's Megatron-LM log pasted as it is: the service reads the run on the cluster
    chosen in the form (its node count from the log) and fits it; a log it cannot read says
    which argument."""
    log = (Path(__file__).resolve().parents[1] / "data" / "megatron"
           / "llama3-8b-fp8-tp2-cp2.log").read_text()
    paste_a_log(page, log, "Kernel speed")
    assert 0.67 < float(page.input_value("#compute_scale")) < 1.5
    assert "Megatron-LM log, 32 GPUs: measured 3.12 s" in page.inner_text("#anchor-result")
    page.fill("#anchor-json", log.replace("fp8_recipe ...................................... "
                                          "delayed", "fp8_recipe ...................................... "
                                          "custom"))
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('refused')")
    assert "log.fp8_recipe" in page.inner_text("#anchor-result")
    fit_a_long_log(page, "[rank0]: ", log, "Megatron-LM log, 32 GPUs: measured 3.12 s")


def fit_a_long_log(page, prefix: str, log: str, read_as: str) -> None:
    """A log longer than a request may carry (NCCL's INFO lines around it, each line starting
    with the framework's ``prefix``) is sent as the lines the service reads, and fitted."""
    noise = "".join(f"{prefix}NCCL INFO Channel {i:05d}/32 : 0 1 2 3\n" for i in range(25_000))
    assert len(noise + log) > 900_000
    page.fill("#compute_scale", "")
    # (As a paste sets it: typing a megabyte through fill would take minutes.)
    page.locator("#anchor-json").evaluate("(el, text) => { el.value = text; }", noise + log)
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('Kernel speed')")
    assert read_as in page.inner_text("#anchor-result")


def test_a_torchtitan_run_pasted_in_the_page_is_read_and_fitted(page):
    """Rank 0's torchtitan log and its job config pasted: the service reads the run on the
    chosen cluster with the chosen model and fits it; without the config the page asks for it
    and sends nothing; a model of another size than the config's, or a config of another run,
    says which; a long log is sent as the lines the reader reads."""
    data = Path(__file__).resolve().parents[1] / "data" / "torchtitan"
    log, config = (data / "llama3-8b-8gpu.log").read_text(), (data / "llama3-8b-8gpu.toml").read_text()
    paste_a_log(page, log, "needs the job config")
    assert page.input_value("#compute_scale") == ""
    page.fill("#anchor-config", config)
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('Kernel speed')")
    assert 0.5 < float(page.input_value("#compute_scale")) < 2
    assert "torchtitan log, 8 GPUs: measured" in page.inner_text("#anchor-result")
    # The model chosen in the form goes with the run: another size than the config's flavor
    # is refused.
    page.select_option("#model", "llama3-70b")
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('refused')")
    assert "num_layers 80, where the config's Llama 3 8B has 32" in page.inner_text(
        "#anchor-result")
    page.select_option("#model", "llama3-8b")
    # A config of another run than the log's (tp 2 against the mesh's tp=1).
    page.fill("#anchor-config", config.replace("tensor_parallel_degree = 1",
                                               "tensor_parallel_degree = 2"))
    page.click("#anchor-button")
    page.wait_for_selector("#anchor-result:has-text('refused')")
    assert "tensor_parallel_degree" in page.inner_text("#anchor-result")
    page.fill("#anchor-config", config)
    fit_a_long_log(page, "[rank0]:[titan] ", log, "torchtitan log, 8 GPUs: measured")


def test_hybrid_sharding_asked_in_the_page(page):
    """The replicas restriction (search.dp_replicate): Llama 3 8B on two DGX H100 nodes with
    ZeRO-3 over 2 replicas lists plans of 2 replicas, whose details name them; a count that
    leaves no shard group (16 replicas of one rank) finds nothing, and the answer says why,
    naming the field; text that is not a count is refused next to the field."""
    open_explorer(page)
    fill(page, {**SMALL, "num_nodes": "2"})
    page.fill("#r-dp_replicate", "2")
    page.select_option("#r-zero", "3")
    page.click("#plan-button")
    page.wait_for_selector("#plans-table tbody tr")
    heads = [t.strip() for t in page.locator("#plans-table thead th").all_inner_texts()]
    col = heads.index("replicas")
    rows = page.locator("#plans-table tbody tr")
    assert rows.count() >= 1
    for i in range(rows.count()):
        cells = rows.nth(i).locator("th, td").all_inner_texts()
        assert cells[col] == "2" and cells[heads.index("ZeRO")] == "3"
    page.locator("#plans-table tbody tr").first.locator("button.link").click()
    page.wait_for_function("document.querySelector('#detail').textContent"
                           ".includes('over 2 replicas')")
    page.fill("#r-dp_replicate", "16")
    page.fill("#r-dp", "16")
    page.click("#plan-button")
    page.wait_for_selector("#infeasible li")
    assert "INFEASIBLE" in page.inner_text("#result-summary")
    assert "dp_replicate" in page.inner_text("#infeasible")
    # A count that is not a number is refused next to its field, before any request.
    page.fill("#r-dp_replicate", "two")
    page.click("#plan-button")
    err = page.locator('.field[data-field="search.dp_replicate"] .field-error')
    err.wait_for()
    assert "not a whole number" in err.inner_text()
    assert page.get_attribute("#r-dp_replicate", "aria-invalid") == "true"


def test_hierarchical_context_parallelism_asked_in_the_page(page):
    """The form's context-parallelism choice (training.ring_attention, cp_a2a_size): Llama 3 8B
    at 128K tokens on 4 nodes with cp held at 32 under the hierarchy of 8-rank all-to-all
    groups plans cp 32; the hierarchy without its group size is refused next to that field."""
    open_explorer(page)
    fill(page, {**SMALL, "num_nodes": "4", "global_batch_size": "8", "seq_length": "131072",
                "top_k": "1"})
    page.fill("#r-cp", "32")
    page.select_option("#ring_attention", "a2a+p2p")
    page.fill("#cp_a2a_size", "8")
    page.click("#plan-button")
    page.wait_for_selector("#plans-table tbody tr")
    heads = [t.strip() for t in page.locator("#plans-table thead th").all_inner_texts()]
    cells = page.locator("#plans-table tbody tr").first.locator("th, td").all_inner_texts()
    assert cells[heads.index("CP")] == "32"
    page.fill("#cp_a2a_size", "")
    page.click("#plan-button")
    err = page.locator('.field[data-field="training.cp_a2a_size"] .field-error')
    err.wait_for()
    assert "needs cp_a2a_size" in err.inner_text()
    assert page.get_attribute("#cp_a2a_size", "aria-invalid") == "true"


def test_tp_communication_overlap_asked_in_the_page(page):
    """GPT-3 175B on 8 DGX H100 nodes: the answer's settings hint names TP communication
    overlap; asked for in the form (training.tp_comm_overlap 'te'), the best plan is the
    hint's tp 8 and no hint is left."""
    open_explorer(page)
    page.select_option("#model", "gpt3-175b")
    page.select_option("#cluster", "dgx-h100")
    for key, value in (("num_nodes", "8"), ("global_batch_size", "1536"),
                       ("seq_length", "2048"), ("top_k", "1")):
        page.fill(f"#{key}", value)
    page.click("#plan-button")
    page.wait_for_selector("#settings-hints li")
    assert "tp_comm_overlap = \"te\"" in page.inner_text("#settings-hints")
    page.select_option("#tp_comm_overlap", "te")
    page.click("#plan-button")
    # The answer replaces the hints and the table together (showResult).
    page.wait_for_selector("#settings-hints li", state="detached")
    heads = [t.strip() for t in page.locator("#plans-table thead th").all_inner_texts()]
    cells = page.locator("#plans-table tbody tr").first.locator("th, td").all_inner_texts()
    assert cells[heads.index("TP")] == "8"
