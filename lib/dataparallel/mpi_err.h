/* An MPI call's failure as a gerr (lib/dataparallel only). */
#ifndef GRPO_MPI_ERR_H
#define GRPO_MPI_ERR_H

#include "../util/err.h"

/* EX_UNAVAILABLE: "CALL: MPI's text for rc". */
int dist_mpi_error(gerr *e, const char *call, int rc);

#endif
