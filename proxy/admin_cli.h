/*
 * admin_cli.h — mongoplex --admin ADDRESS [--json] COMMAND...: the operator's
 * console on the command line (a libmongoc client of the proxy).
 *
 *   show pools|clients|servers|config|mem   {mongoplexShow: LIST}: a table
 *   pause [MEMBER] / resume [MEMBER]         {mongoplexPause|Resume: 1 | MEMBER}
 *   reconnect [MEMBER]                       {mongoplexReconnect: 1 | MEMBER}
 *   kill ID                                  {mongoplexKill: ID}
 *   reload                                   {mongoplexReload: 1}
 *
 * ADDRESS is a mongodb:// URI or a unix socket path. Exit 0 on ok: 1; 1 with
 * the server's errmsg on stderr on an error; 2 on a usage error.
 */
#pragma once

#include <stdbool.h>

int admin_cli_main(const char *address, bool json, int argc, char *const argv[]);
