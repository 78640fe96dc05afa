from bench.webhook import app_with_noop


def test_the_noop_baseline_pays_the_same_transport_checks_as_mutate():
    client = app_with_noop({}).test_client()
    assert client.post("/noop", data=b"{}", content_type="application/json").get_json() == {"ok": True}
    assert client.post("/noop").status_code == 400
    assert client.post("/noop", data=b"x" * 20, content_type="application/json").status_code == 200
    small = app_with_noop({"MAX_BODY_BYTES": 10}).test_client()
    assert "over the limit of 10 bytes" in small.post("/noop", data=b"x" * 20,
                                                       content_type="application/json").get_json()["error"]
