#!/usr/bin/env python3
"""A pipeline step: reads /kratix/input/object.yaml, writes /kratix/output and
/kratix/metadata/status.yaml. Files in ../resources ship with the image."""
import os


def main():
    if os.environ["KRATIX_WORKFLOW_TYPE"] == "promise":
        print(f"Hello from Promise {os.environ['KRATIX_PROMISE_NAME']}")
        return
    name = os.environ["KRATIX_OBJECT_NAME"]
    namespace = os.environ["KRATIX_OBJECT_NAMESPACE"]
    with open("/kratix/output/configmap.yaml", "w") as f:
        f.write(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
            f"  name: {name}\n  namespace: {namespace}\ndata:\n  requestedBy: {name}\n"
        )
    with open("/kratix/metadata/status.yaml", "w") as f:
        f.write(f"message: {name} configured\n")
    print(f"Hello from {name} {namespace}")


if __name__ == "__main__":
    main()
