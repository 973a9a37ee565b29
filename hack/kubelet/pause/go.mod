module github.com/kshard/kshard/hack/kubelet/pause

go 1.26.0
