module flowservice

go 1.26
