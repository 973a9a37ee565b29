module github.com/kshard/kshard/hack/kitcheck

go 1.26.0

require golang.org/x/mod v0.32.0
