module github.com/softnic/softnic

go 1.26
