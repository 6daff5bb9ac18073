/* The census's state, and the check its heap callbacks make. */
#include "census_state.h"
#include "util.h"
#include "writer.h"

struct census cs;

int census_over(void)
{
	if (cs.deadline != 0 && djx_now_ns() > cs.deadline) {
		cs.aborted = 1;
		return 1;
	}
	/* The loader asked to stop (Ctrl-C) or went away: the writer thread
	 * reads the command later. */
	if (djx_writer_quit_pending()) {
		cs.cancelled = 1;
		return 1;
	}
	return 0;
}
