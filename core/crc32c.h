/*
 * crc32c.h — CRC-32C (Castagnoli), the OP_MSG checksum.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(const uint8_t *data, size_t len);
