/* SPDX-License-Identifier: MIT */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

static int max_level = LOG_INFO;
static const char *prefix = "codeinterp";
static int use_journal = -1;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix(const char *p) {
        prefix = p;
}

/* systemd sets JOURNAL_STREAM=dev:ino when stderr is a journal stream. */
static int detect_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        struct stat st;
        unsigned long long dev, ino;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return 0;
        if (fstat(STDERR_FILENO, &st) < 0)
                return 0;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);

        if (use_journal < 0)
                use_journal = detect_journal();
        if (use_journal)
                sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level, "CODE_FILE=%s", file, "CODE_LINE=%i", line,
                                "SYSLOG_IDENTIFIER=%s", prefix, NULL);
        else
                fprintf(stderr, "%s[%d]: %s\n", prefix, (int) getpid(), buf);
        errno = saved;
        return -error;
}
