module github.com/graph-engineering/graph-engineering-mcp

go 1.26

require (
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/oklog/ulid/v2 v2.1.2
	github.com/urfave/cli/v2 v2.27.7
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
)
