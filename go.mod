module github.com/execbox/execbox

go 1.26.8

require (
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)
