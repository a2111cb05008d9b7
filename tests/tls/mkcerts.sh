#!/usr/bin/env bash
# Throwaway TLS material for the tests (never use it for anything else).
#
#   tests/tls/mkcerts.sh DIR
#
# Writes into DIR (EC P-256 keys, PEM):
#   ca.pem ca.key            the test CA
#   otherca.pem              an unrelated CA (a client trusting it sees "wrong CA")
#   server.pem server.key    localhost + 127.0.0.1, serial 0x1001
#   server2.pem server2.key  the same names, serial 0x1002 (certificate rotation)
#   wronghost.pem .key       for wrong.example only, serial 0x1003
#   expired.pem .key         localhost + 127.0.0.1, expired in 2020, serial 0x1004
#   client.pem client.key    a client certificate (CN=mongoplex-test-client), serial 0x2001
#   client-combined.pem      client.pem + client.key (tlsCertificateKeyFile)
#   server-combined.pem      server.pem + server.key
set -euo pipefail

dir="${1:?usage: mkcerts.sh DIR}"
mkdir -p "$dir"
cd "$dir"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() { # name subject
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "$2" -days 30 -out "$1.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

# name serial san extendedKeyUsage [subject]
leaf() {
  local name="$1" serial="$2" san="$3" eku="$4" subj="${5:-/CN=localhost}"
  key "$name.key"
  openssl req -new -key "$name.key" -subj "$subj" -out "$name.csr"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$san" "$eku" > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -set_serial "$serial" -days 30 \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

# An expired certificate needs explicit dates: `openssl ca` takes them.
expired() {
  key expired.key
  openssl req -new -key expired.key -subj /CN=localhost -out expired.csr
  mkdir -p ca.db && : > ca.db/index.txt && echo 1004 > ca.db/serial
  cat > ca.db/ca.cnf <<CNF
[ca]
default_ca = test
[test]
database = ca.db/index.txt
serial = ca.db/serial
new_certs_dir = ca.db
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ext
[any]
commonName = supplied
[ext]
subjectAltName = DNS:localhost,IP:127.0.0.1
extendedKeyUsage = serverAuth
basicConstraints = CA:FALSE
CNF
  openssl ca -batch -config ca.db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
    -startdate 20200101000000Z -enddate 20200102000000Z -out expired.pem -notext 2>/dev/null
  rm -rf ca.db expired.csr
}

ca ca "/CN=mongoplex test CA"
ca otherca "/CN=mongoplex other CA" && rm -f otherca.key
leaf server 0x1001 "DNS:localhost,IP:127.0.0.1" serverAuth
leaf server2 0x1002 "DNS:localhost,IP:127.0.0.1" serverAuth
leaf wronghost 0x1003 "DNS:wrong.example" serverAuth
leaf client 0x2001 "DNS:client" clientAuth "/CN=mongoplex-test-client"
expired
cat client.pem client.key > client-combined.pem
cat server.pem server.key > server-combined.pem
chmod 600 ./*.key ./*-combined.pem
