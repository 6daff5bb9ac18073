package main

import "os"

const showAbout = `Prints the tables of a results file again, of whichever subcommand
wrote it: run's, toggle's, switch's or irq's.`

func cmdShow(args []string) int {
	fs := newFlagSet("show", " FILE", showAbout)
	if code, ok := parse(fs, args, 1); !ok {
		return code
	}
	var r result
	if err := readJSON(fs.Arg(0), &r); err != nil {
		fatal("%v", err)
	}
	printTable(os.Stdout, &r, nil)
	if len(r.Toggle) > 0 {
		for i := range r.Toggle { // files from before the geomean was kept
			r.Toggle[i].summarize()
		}
		printToggle(os.Stdout, toggleTitle, r.Toggle)
	}
	if len(r.Switch) > 0 {
		printToggle(os.Stdout, switchTitle, r.Switch)
	}
	if len(r.IRQ) > 0 {
		printIRQ(os.Stdout, r.IRQ)
	}
	return 0
}
