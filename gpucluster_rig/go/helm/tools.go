//go:build tools

// Package tools pins the Helm CLI the rig applies releases with: the Helm library version that
// terraform-provider-helm 3.1.1 links (its go.mod requires helm.sh/helm/v3 v3.18.4).
package tools

import _ "helm.sh/helm/v3/cmd/helm"
