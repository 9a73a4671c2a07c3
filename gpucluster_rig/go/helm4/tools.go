//go:build tools

// Package tools pins the Helm 4 CLI that runs AICR's own deploy.sh on the rig (the side-by-side
// comparison in docs/rehearse.md); the rig's own releases use go/helm (Helm 3).
package tools

import _ "helm.sh/helm/v4/cmd/helm"
