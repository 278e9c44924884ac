"""py-eureka-client (PyPI) against a heureka cluster, driven by e2e/pyclient_test.go.

It registers PYAPP/<id> through the nodes given in argv[1] (comma-separated
Eureka URLs), heartbeats and fetches (py-eureka-client registers in JSON and
reads the registry in XML), and prints one JSON line per half second:
{"apps": {"APP": ["id:STATUS", ...]}}. On SIGTERM it stops the client, which
marks the instance DOWN and cancels it, prints {"cancelled": true} and exits.
It gives up by itself after 90 seconds.
"""
import json
import signal
import sys
import time

import py_eureka_client.eureka_client as eureka_client


def main():
    urls, instance_id, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = eureka_client.init(
        eureka_server=urls,
        app_name="pyapp",
        instance_id=instance_id,
        instance_host="127.0.0.1",
        instance_ip="127.0.0.1",
        instance_port=port,
        renewal_interval_in_secs=1,
        duration_in_secs=30,
        ha_strategy=eureka_client.HA_STRATEGY_STICK,
    )
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    deadline = time.monotonic() + 90
    while not stopping and time.monotonic() < deadline:
        apps = {}
        for app in client.applications.applications:
            apps[app.name] = sorted(f"{i.instanceId}:{i.status}" for i in app.instances)
        print(json.dumps({"apps": apps}), flush=True)
        time.sleep(0.5)
    eureka_client.stop()
    print(json.dumps({"cancelled": True}), flush=True)


if __name__ == "__main__":
    main()
