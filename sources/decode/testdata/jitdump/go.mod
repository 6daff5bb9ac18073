module jitdump

go 1.26
