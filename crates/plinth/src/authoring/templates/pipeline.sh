#!/usr/bin/env sh
# A pipeline step. It reads the request (or the Promise) from /kratix/input/object.yaml,
# writes the documents to schedule to /kratix/output, and may write
# /kratix/metadata/status.yaml (merged into the request's status) and
# /kratix/metadata/destination-selectors.yaml. Files in ../resources ship with the image.
set -eu
resources="$(dirname "$0")/../resources"

if [ "$KRATIX_WORKFLOW_TYPE" = promise ]; then
  # The Promise's own workflow: ship the files in resources/ to the Destinations (not
  # hidden ones such as .gitkeep).
  if [ -n "$(ls "$resources" 2>/dev/null)" ]; then cp -R "$resources"/* /kratix/output/; fi
  echo "Hello from Promise $KRATIX_PROMISE_NAME"
  exit 0
fi

name="$KRATIX_OBJECT_NAME"
namespace="$KRATIX_OBJECT_NAMESPACE"
cat > /kratix/output/configmap.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${name}
  namespace: ${namespace}
data:
  requestedBy: ${name}
EOF
cat > /kratix/metadata/status.yaml <<EOF
message: ${name} configured
EOF
echo "Hello from ${name} ${namespace}"
