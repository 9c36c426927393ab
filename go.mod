module flowservice

go 1.26

require (
	github.com/expr-lang/expr v1.17.8
	github.com/robfig/cron/v3 v3.0.1
)
